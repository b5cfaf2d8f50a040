/* emu_comm_nccl.c - engine/tp/comm_nccl.c with its NCCL section on, for the
 * emulator: compiled over emu_nccl.c's NCCL instead of libnccl's (a
 * second object of the same source, as the CMake section says, without
 * changing how the engine's own comm_nccl.o is compiled). */
#define LD_HAVE_NCCL 1
#include "engine/tp/comm_nccl.c"
