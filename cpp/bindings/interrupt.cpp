// SIGINT during a long kernel: a handler chained in front of Python's sets a
// flag that the kernels poll between row tiles (the core's cancel flag), then
// lets Python's own handler record the signal; once the GIL is back,
// PyErr_CheckSignals raises KeyboardInterrupt.
#include "interrupt.hpp"

#include <pybind11/pybind11.h>

#include <atomic>
#include <csignal>

#include "softkmeans/kernels.hpp"

namespace py = pybind11;

namespace softkmeans_bindings {
namespace {

std::atomic<int> g_sigint_seen{0};
struct sigaction g_python_sigint;  // the handler we chain to, saved per call

extern "C" void chained_sigint(int sig) {
  g_sigint_seen.store(1, std::memory_order_relaxed);
  if (g_python_sigint.sa_flags & SA_SIGINFO) return;  // not Python's plain handler
  if (g_python_sigint.sa_handler != SIG_DFL && g_python_sigint.sa_handler != SIG_IGN)
    g_python_sigint.sa_handler(sig);
}

bool on_main_thread() {
  static const unsigned long main_ident =
      py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();
  return PyThread_get_thread_ident() == main_ident;
}

// Chains chained_sigint in front of Python's plain handler (a handler of our
// own, SIG_DFL, SIG_IGN or a sigaction-style one: left alone). Returns whether
// it did.
bool hook_sigint() {
  struct sigaction current;
  if (sigaction(SIGINT, nullptr, &current) != 0 || (current.sa_flags & SA_SIGINFO) ||
      current.sa_handler == SIG_DFL || current.sa_handler == SIG_IGN ||
      current.sa_handler == chained_sigint)
    return false;
  g_python_sigint = current;
  g_sigint_seen.store(0, std::memory_order_relaxed);
  struct sigaction mine = current;
  mine.sa_handler = chained_sigint;
  return sigaction(SIGINT, &mine, nullptr) == 0;
}

// Puts Python's handler back (and the cancel flag away) once, also when an
// exception (bad_alloc) leaves the call.
struct Unhook {
  bool hooked;
  void release() {
    if (!hooked) return;
    softkmeans::set_thread_cancel_flag(nullptr);
    sigaction(SIGINT, &g_python_sigint, nullptr);
    hooked = false;
  }
  ~Unhook() { release(); }
};

}  // namespace

void run_native_call(void (*call)(void*), void* context) {
  const bool hooked = on_main_thread() && hook_sigint();
  Unhook unhook{hooked};
  {
    py::gil_scoped_release release;
    if (hooked) softkmeans::set_thread_cancel_flag(&g_sigint_seen);
    call(context);
  }
  if (!hooked) return;
  unhook.release();
  if (!g_sigint_seen.load(std::memory_order_relaxed)) return;
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  // The Python-level handler returned without raising (a user's own handler):
  // the cancelled outputs are incomplete, so compute them again, to the end.
  py::gil_scoped_release release;
  call(context);
}

}  // namespace softkmeans_bindings
