// Symbol visibility for libtopology. The library is built with hidden
// visibility; every public class and function is marked TOPOLOGY_EXPORT.
#ifndef TOPOLOGY_EXPORT_H_
#define TOPOLOGY_EXPORT_H_

// Every public header includes this one: say plainly what the headers need
// rather than fail later on a C++20 construct.
#if !defined(__cplusplus) || __cplusplus < 202002L
#error \
    "libtopology's headers need C++20: compile with -std=c++20 or later (CMake: libtopology::* targets require cxx_std_20)"
#endif

#if defined(TOPOLOGY_SHARED_LIBRARY) && defined(TOPOLOGY_COMPILE_LIBRARY)
#define TOPOLOGY_EXPORT [[gnu::visibility("default")]]
#else
#define TOPOLOGY_EXPORT
#endif

#endif  // TOPOLOGY_EXPORT_H_
