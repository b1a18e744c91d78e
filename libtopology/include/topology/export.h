// Symbol visibility for libtopology. The library is built with hidden
// visibility; every public class and function is marked TOPOLOGY_EXPORT.
#ifndef TOPOLOGY_EXPORT_H_
#define TOPOLOGY_EXPORT_H_

#if defined(TOPOLOGY_SHARED_LIBRARY) && defined(TOPOLOGY_COMPILE_LIBRARY)
#define TOPOLOGY_EXPORT [[gnu::visibility("default")]]
#else
#define TOPOLOGY_EXPORT
#endif

#endif  // TOPOLOGY_EXPORT_H_
