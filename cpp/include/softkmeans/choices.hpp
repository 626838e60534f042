// The kernels' choices made for speed (SPEC.md, "Choices made for speed never
// change a bit"): tile bytes, the direct path's lane threshold, the lane
// reduction's register blocking, the prefetch distance, the bf16 candidate pass and its
// thresholds. Each is made for the running CPU, once per process: from a table
// of measured CPUs (vendor, family, model), else by a short probe (choices.cpp,
// well under a second), then any override of SOFTKMEANS_KERNEL_CHOICES. Every
// output is the same bytes whichever values they take; only time depends on
// them. The row tile (kRowTile), the unit of deterministic reduction, is not
// one of them, nor are kSmallDim and kLaneAccK (their two sides give
// different bits: they are part of the contract).
//
// SOFTKMEANS_KERNEL_CHOICES: comma-separated name=value pairs, names as in
// KernelChoices (bf16=off, small_k=32, lane_blocking=2x8, lane_pipeline=on,
// prefetch_groups=2, ...), booleans on/off, sizes in bytes; the single word "probe" (alone or
// first) probes whatever the table says. SOFTKMEANS_BF16=0 is bf16=off.
#pragma once

#include <string>
#include <vector>

#include "softkmeans/config.hpp"

namespace softkmeans {

struct KernelChoices {
  // Bytes of the per-thread distance block (rows x padded k) a row block's
  // reduction consumes while it is still in L1/L2.
  index_t dist_block_bytes = 96 * 1024;
  // The same for the softmax step, whose R^T X accumulation wants more rows
  // per block (its (d + 1, k) partial is read and written once per block).
  index_t softmax_block_bytes = 384 * 1024;
  // The group of distance rows whose minima the softmax step takes before
  // their exps (the group stays in L1 between the two).
  index_t softmax_group_bytes = 16 * 1024;
  // The narrow softmax accumulation (k <= the micro-kernel's NR centroids,
  // impl/stats_narrow.hpp) from this d: features in the lanes, the block's
  // rows of X read where they are instead of copied into w x rows. Below it
  // the dense accumulation (centroids in the lanes).
  index_t narrow_softmax_min_dim = 128;
  // The narrow accumulation's row block: rows of X of about this many bytes,
  // read twice (distances, then R^T X) while they are still in L2.
  index_t softmax_rows_bytes = 256 * 1024;
  // The distance micro-kernel takes the centroid panel (d, NR) a slice of
  // about this many bytes at a time over every row group of a block (the
  // slice stays in L1): at d = 8000 a whole panel is 1 MB, read per MR rows.
  index_t panel_bytes = 32 * 1024;
  // The centroid block the lane reduction takes against every row group of a
  // row block before the next (kept in L1/L2).
  index_t lane_block_bytes = 32 * 1024;
  // On the direct path (d <= kSmallDim), up to this many centroids the row
  // reduction puts rows in the vector lanes (centroids broadcast) instead of
  // centroids.
  index_t small_k = 64;
  // The lane reduction's register blocking: 0 the unit's LR x LC (4 x 4
  // vectors of rows x broadcast centroids on AVX-512), 1 half the rows by
  // twice the centroids (2 x 8): fewer row loads, more broadcasts.
  int lane_blocking = 0;
  // At d = 16 (the lane reduction's LR LC on AVX-512), rows in the lanes
  // against 2 LC centroids at a time, each step's distances folded while the
  // next step's are formed (impl/engine_lanes.hpp, lanes_piped). On Zen 5
  // (its table row), one thread, the hard step 0.93-0.96x the time at
  // (1e6, 16, 64). Off by default: it depends on how the CPU's scheduler
  // takes a burst of the fold's min/max/compare operations.
  bool lane_pipeline = false;
  // The lane reduction requests the rows this many groups ahead from memory
  // while it reduces one (0: none).
  index_t prefetch_groups = 1;
  // The bf16 candidate pass (softkmeans/bf16.hpp) where the CPU has it, and
  // the d, k and k d it engages from. Below them a row's fixed costs
  // (packing, thresholds, the candidate scan and the recomputation of its 2-4
  // candidates) outweigh the halved products: on Zen 5, hard step with /
  // without the pass, one thread, blobs (bench/bf16.py's data), 0.7-0.8 at
  // (d, k) = (64, 256) and (128, 256), 0.96 at (64, 512), 1.05 at (128, 512),
  // 1.13 at (64, 1024), 1.3-1.4 at (256, 1024).
  bool bf16 = true;
  index_t bf16_min_dim = 64;
  index_t bf16_min_k = 512;
  index_t bf16_min_work = 65536;
  // The projected pass's first step (impl/projected.hpp) in split-bf16 on
  // AMX tiles (softkmeans/amx.hpp) where the CPU and Linux allow them.
  bool amx = true;
};

// The default distance block, for a caller whose rows are reduced in
// registers (Engine's in_registers: its block size is then the row tile's).
inline constexpr index_t kDistBlockBytes = KernelChoices{}.dist_block_bytes;

// The running CPU as the choices key it.
struct CpuDescription {
  std::string vendor;  // "AuthenticAMD", "GenuineIntel", ...
  int family = 0;      // display family (base + extended)
  int model = 0;       // display model (base + extended << 4 where it applies)
  bool avx512 = false, avx512_bf16 = false, amx_bf16 = false;
  // The CPU's name in the table and its 512-bit FMA ports, or "" where unknown.
  std::string table_name, fma512_ports;
};

const CpuDescription& cpu_description();

// The choices in force now (made at the first call of any kernel or of this).
KernelChoices kernel_choices();

// Each choice's name, value and why it has it: "table: <cpu>", "probe",
// "default", "override (SOFTKMEANS_KERNEL_CHOICES)", "set".
struct ChoiceReport {
  std::string name, value, source;
};
std::vector<ChoiceReport> kernel_choice_reports();

// Applies `spec` (the syntax of SOFTKMEANS_KERNEL_CHOICES; "" changes nothing)
// in this process, each applied choice reported as "set". Returns false, with
// a message naming what was wrong in *error, and changes nothing on a bad spec.
bool set_kernel_choices(const std::string& spec, std::string* error);

// Back to the choices of process start (table or probe, then the environment).
void reset_kernel_choices();

}  // namespace softkmeans
