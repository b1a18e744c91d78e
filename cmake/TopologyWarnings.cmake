# topology_set_warnings(<target>): the project's warning set, -Werror only
# with TOPOLOGY_WERROR.
function(topology_set_warnings target)
  target_compile_options(
    ${target}
    PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wsign-conversion
            -Wnon-virtual-dtor -Wold-style-cast
            $<$<BOOL:${TOPOLOGY_WERROR}>:-Werror>)
endfunction()
