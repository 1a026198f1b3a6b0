#pragma once
// DML_HD marks the objectives' per-coordinate functions (losses, steps,
// coordinate gaps, proximal steps) as callable from CUDA kernels too, so the
// GPU solvers (TPA-SCD, dml/gpu/tpa_scd.hpp) run the very code the
// CPU solvers run. Empty outside nvcc. nvcc also needs
// --expt-relaxed-constexpr for the std::min/std::max these functions call.
#if defined(__CUDACC__)
#define DML_HD __host__ __device__
#else
#define DML_HD
#endif
