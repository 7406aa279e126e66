// One x86-64 level's kernels as a loadable module (host_kernels.h): built
// once per level, with PJRT_HOST_ISA naming the level's namespace and
// PJRT_HOST_ISA_NAME its name, everything hidden but the table's function.
#ifndef PJRT_HOST_ISA_NAME
#error "define PJRT_HOST_ISA_NAME (\"x86-64-v3\"...) to build a kernel module"
#endif

#include "compiler/host/expression_kernels.inc"
#include "compiler/host/gemm_kernels.inc"

extern "C" __attribute__((visibility("default")))
const pjrt::compiler::host::HostKernelTable*
pjrt_host_kernels() {
  namespace host = pjrt::compiler::host;
  static const host::HostKernelTable table = {
      host::kHostKernelAbi,
      sizeof(host::HostKernelTable),
      sizeof(host::Expression),
      sizeof(host::BlockScratch),
      PJRT_HOST_ISA_NAME,
      &host::PJRT_HOST_ISA::EvaluateBlock,
      &host::PJRT_HOST_ISA::StorageToCompute,
      &host::PJRT_HOST_ISA::ComputeToStorage,
      &host::PJRT_HOST_ISA::Gemm,
  };
  return &table;
}
