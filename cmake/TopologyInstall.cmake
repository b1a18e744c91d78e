# topology_install_archive(<target> <ExportSet> <name> [<install() file sets>])
# installs one component of the package as a static archive, the way every
# component is installed: lib/libtopology-<name>.a (EXPORT_NAME <target>,
# so that consumers link libtopology::<target>), its HEADERS file set under
# include/ (more file sets after <name>, as install(TARGETS) takes them),
# lib/cmake/libtopology/libtopology<ExportSet>Targets.cmake, which
# libtopologyConfig.cmake includes for that component, and
# lib/pkgconfig/libtopology-<name>.pc from cmake/libtopology-<name>.pc.in.
function(topology_install_archive target export_set name)
  set_target_properties(${target} PROPERTIES OUTPUT_NAME topology-${name}
                                             EXPORT_NAME ${target})
  install(
    TARGETS ${target}
    EXPORT libtopology${export_set}Targets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    FILE_SET HEADERS DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} ${ARGN})
  install(
    EXPORT libtopology${export_set}Targets
    NAMESPACE libtopology::
    DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/libtopology)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/libtopology-${name}.pc.in
                 ${PROJECT_BINARY_DIR}/libtopology-${name}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/libtopology-${name}.pc
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endfunction()
