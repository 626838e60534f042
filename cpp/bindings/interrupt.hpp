// Kernels run with the GIL released and, from the main thread, interruptible
// by SIGINT (Ctrl-C raises KeyboardInterrupt once the kernel has stopped).
#pragma once

#include <type_traits>

namespace softkmeans_bindings {

// Calls call(context) as run_native describes.
void run_native_call(void (*call)(void*), void* context);

// Runs f() with the GIL released. From the main thread (the one Python
// delivers signals to) a SIGINT makes the kernels stop at their next row tile
// (the core's cancel flag) and KeyboardInterrupt is raised once the GIL is
// back; if the Python-level handler returns without raising, f() runs again,
// to the end (the cancelled outputs are incomplete). Calls from other threads
// run to the end. f may run twice: it must only write its outputs.
template <typename F>
void run_native(F&& f) {
  using Fn = std::remove_reference_t<F>;
  run_native_call([](void* p) { (*static_cast<Fn*>(p))(); }, &f);
}

}  // namespace softkmeans_bindings
