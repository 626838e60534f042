// The kernels' choices made for speed (softkmeans/choices.hpp): the CPU's
// key, the table of measured CPUs, the override's syntax and the state of
// this process. The probe is in choices_probe.cpp.
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "choices_probe.hpp"
#include "softkmeans/choices.hpp"

namespace softkmeans {
namespace {

// ---- the CPU ----

CpuDescription read_cpu() {
  CpuDescription cpu;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return cpu;
  const unsigned max_leaf = a;
  char vendor[13] = {};
  std::memcpy(vendor, &b, 4);
  std::memcpy(vendor + 4, &d, 4);
  std::memcpy(vendor + 8, &c, 4);
  cpu.vendor = vendor;
  __get_cpuid(1, &a, &b, &c, &d);
  const int base_family = (a >> 8) & 0xF, base_model = (a >> 4) & 0xF;
  cpu.family = base_family == 0xF ? base_family + static_cast<int>((a >> 20) & 0xFF) : base_family;
  cpu.model = (base_family == 0x6 || base_family == 0xF)
                  ? base_model + static_cast<int>(((a >> 16) & 0xF) << 4)
                  : base_model;
  cpu.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  if (max_leaf >= 7) {
    __cpuid_count(7, 1, a, b, c, d);
    cpu.avx512_bf16 = cpu.avx512 && ((a >> 5) & 1u);  // leaf 7.1 EAX bit 5
    __cpuid_count(7, 0, a, b, c, d);
    cpu.amx_bf16 = (d >> 22) & 1u;  // leaf 7.0 EDX bit 22
  }
#endif
  return cpu;
}

// ---- the table of measured CPUs ----

struct TableRow {
  const char* vendor;
  int family, model;
  const char* name;
  const char* fma512_ports;
  // The choices measured there (the override's syntax) and whether every
  // other choice's default was measured there too.
  const char* spec;
  bool defaults_measured;
};

const TableRow kTable[] = {
    // The defaults of KernelChoices were measured here (config.hpp's history),
    // and lane_pipeline (choices.hpp).
    {"AuthenticAMD", 26, 2, "AMD Zen 5 (EPYC)", "2 (full-width 512-bit)", "lane_pipeline=on",
     true},
    // Issue 33's measurement (2 cores, 51a283d): the bf16 pass made the hard
    // step 0.75x and 0.70x as fast at (2e5, 256, 1024) and (1e5, 768, 1024).
    {"GenuineIntel", 6, 207, "Intel Emerald Rapids", "2 (ports 0 and 5)", "bf16=off", false},
};

const TableRow* table_row(const CpuDescription& cpu) {
  for (const TableRow& row : kTable)
    if (cpu.vendor == row.vendor && cpu.family == row.family && cpu.model == row.model)
      return &row;
  return nullptr;
}

// ---- the choices by name ----

struct Field {
  const char* name;
  std::function<bool(KernelChoices&, const std::string&)> set;  // false: bad value
  std::function<std::string(const KernelChoices&)> get;
  bool probed;  // choices_probe.cpp measures it where the table does not say
};

bool parse_count(const std::string& s, index_t min, index_t* out) {
  if (s.empty() || s.size() > 18 || s.find_first_not_of("0123456789") != std::string::npos)
    return false;
  const index_t v = std::stoll(s);
  if (v < min) return false;
  *out = v;
  return true;
}

bool parse_switch(const std::string& s, bool* out) {
  if (s == "on" || s == "1") *out = true;
  else if (s == "off" || s == "0") *out = false;
  else return false;
  return true;
}

Field count_field(const char* name, index_t KernelChoices::*m, index_t min) {
  return {name,
          [m, min](KernelChoices& c, const std::string& s) {
            return parse_count(s, min, &(c.*m));
          },
          [m](const KernelChoices& c) { return std::to_string(c.*m); }, false};
}

Field switch_field(const char* name, bool KernelChoices::*m, bool probed) {
  return {name, [m](KernelChoices& c, const std::string& s) { return parse_switch(s, &(c.*m)); },
          [m](const KernelChoices& c) { return std::string(c.*m ? "on" : "off"); }, probed};
}

const std::vector<Field>& fields() {
  static const std::vector<Field> all = {
      count_field("dist_block_bytes", &KernelChoices::dist_block_bytes, 1),
      count_field("softmax_block_bytes", &KernelChoices::softmax_block_bytes, 1),
      count_field("softmax_group_bytes", &KernelChoices::softmax_group_bytes, 1),
      count_field("narrow_softmax_min_dim", &KernelChoices::narrow_softmax_min_dim, 0),
      count_field("softmax_rows_bytes", &KernelChoices::softmax_rows_bytes, 1),
      count_field("panel_bytes", &KernelChoices::panel_bytes, 1),
      count_field("lane_block_bytes", &KernelChoices::lane_block_bytes, 1),
      count_field("small_k", &KernelChoices::small_k, 0),
      {"lane_blocking",
       [](KernelChoices& c, const std::string& s) {
         if (s != "4x4" && s != "2x8") return false;
         c.lane_blocking = s == "2x8" ? 1 : 0;
         return true;
       },
       [](const KernelChoices& c) { return std::string(c.lane_blocking ? "2x8" : "4x4"); }, true},
      switch_field("lane_pipeline", &KernelChoices::lane_pipeline, true),
      count_field("prefetch_groups", &KernelChoices::prefetch_groups, 0),
      switch_field("bf16", &KernelChoices::bf16, true),
      count_field("bf16_min_dim", &KernelChoices::bf16_min_dim, 0),
      count_field("bf16_min_k", &KernelChoices::bf16_min_k, 0),
      count_field("bf16_min_work", &KernelChoices::bf16_min_work, 0),
      switch_field("amx", &KernelChoices::amx, false),
  };
  return all;
}

// The choices and their sources, field by field (fields()'s order).
struct Made {
  KernelChoices values;
  std::vector<std::string> sources;
};

// Applies spec ("a=b,c=d"; the word "probe" is skipped: the caller reads it)
// to made with `source`; false with *error on a bad spec, made unchanged.
bool apply_spec(const std::string& spec, const std::string& source, Made* made,
                std::string* error) {
  Made next = *made;
  std::stringstream in(spec);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty() || item == "probe") continue;
    const auto eq = item.find('=');
    const std::string name = item.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
    bool known = false;
    for (std::size_t f = 0; f < fields().size(); ++f) {
      if (name != fields()[f].name) continue;
      known = true;
      if (eq == std::string::npos || !fields()[f].set(next.values, value)) {
        *error = "bad value '" + value + "' for kernel choice '" + name + "'";
        return false;
      }
      next.sources[f] = source;
    }
    if (!known) {
      std::string names;
      for (const Field& f : fields()) names += std::string(names.empty() ? "" : ", ") + f.name;
      *error = "unknown kernel choice '" + name + "' (known: " + names + ", probe)";
      return false;
    }
  }
  *made = next;
  return true;
}

bool wants_probe(const std::string& spec) {
  return spec == "probe" || spec.rfind("probe,", 0) == 0;
}

// The state of this process: what the table and the environment say (made at
// the first use), then the probe of what neither said (ensure_kernel_choices).
struct State {
  std::mutex mutex;
  Made start, now;
  std::string env_error;
  std::once_flag probed;
  State() {
    const CpuDescription& cpu = cpu_description();
    start.sources.assign(fields().size(), "default");
    const char* env = std::getenv("SOFTKMEANS_KERNEL_CHOICES");
    const std::string spec = env != nullptr ? env : "";
    if (const TableRow* row = table_row(cpu)) {
      const std::string source = std::string("table: ") + row->name;
      if (row->defaults_measured) start.sources.assign(fields().size(), source);
      std::string unused;
      apply_spec(row->spec, source, &start, &unused);
    }
    for (std::size_t f = 0; f < fields().size(); ++f)
      if (fields()[f].probed && (start.sources[f] == "default" || wants_probe(spec)))
        start.sources[f] = "probe";
    const char* bf16 = std::getenv("SOFTKMEANS_BF16");
    if (bf16 != nullptr && std::string(bf16) == "0")
      apply_spec("bf16=off", "override (SOFTKMEANS_BF16=0)", &start, &env_error);
    if (!apply_spec(spec, "override (SOFTKMEANS_KERNEL_CHOICES)", &start, &env_error))
      env_error = "SOFTKMEANS_KERNEL_CHOICES ignored: " + env_error;
    now = start;
  }
};

State& state() {
  static State s;
  return s;
}

}  // namespace

const CpuDescription& cpu_description() {
  static const CpuDescription cpu = [] {
    CpuDescription c = read_cpu();
    if (const TableRow* row = table_row(c)) {
      c.table_name = row->name;
      c.fma512_ports = row->fma512_ports;
    }
    return c;
  }();
  return cpu;
}

void ensure_kernel_choices() {
  State& s = state();
  std::call_once(s.probed, [&s] {
    std::vector<std::string> pending;
    for (std::size_t f = 0; f < fields().size(); ++f)
      if (s.start.sources[f] == "probe") pending.push_back(fields()[f].name);
    if (pending.empty()) return;
    // The probe times kernels that read the choices (kernel_choices()): it
    // sets them through set_probe_choice, never through this function.
    const std::string found = probe_kernel_choices(pending);
    std::lock_guard<std::mutex> lock(s.mutex);
    std::string unused;
    apply_spec(found, "probe", &s.start, &unused);
    s.now = s.start;
  });
}

void set_probe_choice(const std::string& spec) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  std::string unused;
  Made m = s.now;
  apply_spec(spec, "probe", &m, &unused);
  s.now.values = m.values;
}

KernelChoices kernel_choices() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.now.values;
}

std::vector<ChoiceReport> kernel_choice_reports() {
  ensure_kernel_choices();
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  std::vector<ChoiceReport> out;
  for (std::size_t f = 0; f < fields().size(); ++f)
    out.push_back({fields()[f].name, fields()[f].get(s.now.values), s.now.sources[f]});
  if (!s.env_error.empty()) out.push_back({"SOFTKMEANS_KERNEL_CHOICES", "", s.env_error});
  return out;
}

bool set_kernel_choices(const std::string& spec, std::string* error) {
  ensure_kernel_choices();
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return apply_spec(spec, "set", &s.now, error);
}

void reset_kernel_choices() {
  ensure_kernel_choices();
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.now = s.start;
}

}  // namespace softkmeans
