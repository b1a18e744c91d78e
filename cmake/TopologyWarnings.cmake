# topology_set_warnings(<target>): the project's warning set, -Werror only
# with TOPOLOGY_WERROR.
function(topology_set_warnings target)
  target_compile_options(
    ${target}
    PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wsign-conversion
            -Wnon-virtual-dtor -Wold-style-cast
            $<$<BOOL:${TOPOLOGY_WERROR}>:-Werror>)
  # GCC 12 at -O3 (the release preset) reports -Wrestrict overlaps inside
  # std::string's inlined insert() for "x" + std::string (GCC bug 105651,
  # fixed in 13): kept as a warning there, not an error.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU"
     AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    target_compile_options(${target} PRIVATE -Wno-error=restrict)
  endif()
endfunction()
