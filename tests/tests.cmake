# tests/tests.cmake - every test target, included by the top CMakeLists.txt
# (same scope and build folder, so test binaries sit in the build's root).
#
# Names: tests/<path>/test_<concept>.c is the executable test_<concept> and
# the ctest "<path with dots>.<concept>" (tests/engine/tp/test_tp.c:
# test_tp, engine.tp.tp); the same source built over the CUDA mock or
# emulator adds ".mock" / ".emu" (test_tp_emu, engine.tp.tp.emu).  Labels:
# cpu (what `ctest -L cpu` and CI run), gpu (a device), emu and emu_long
# (the CUDA emulator; emu_long left out under the sanitizers).

set(LD_TEST_DEFS
    LD_SHARED_DIR="${LOGDIFF_SHARED_DIR}"
    LD_SOURCE_DIR="${CMAKE_SOURCE_DIR}"
    LD_TESTDATA_DIR="${CMAKE_SOURCE_DIR}/testdata"
    LD_BUILD_DIR="${CMAKE_BINARY_DIR}")
set(LD_CLI_TEST_ENV
    "LD_SOURCE_DIR=${CMAKE_SOURCE_DIR};LD_SHARED_DIR=${LOGDIFF_SHARED_DIR};LD_BUILD_DIR=${CMAKE_BINARY_DIR}")

# C unit tests: every tests/**/test_<concept>.c.  LD_TEST_SRC_<concept> and
# LD_TEST_NAME_<concept> keep each one's path and ctest name for the
# variants below.
file(GLOB_RECURSE LD_TEST_SRC CONFIGURE_DEPENDS tests/test_*.c)
foreach(src ${LD_TEST_SRC})
  file(RELATIVE_PATH rel ${CMAKE_SOURCE_DIR}/tests ${src})
  get_filename_component(dir ${rel} DIRECTORY)
  get_filename_component(stem ${rel} NAME_WE)
  string(REGEX REPLACE "^test_" "" concept ${stem})
  string(REPLACE "/" "." dir ${dir})
  set(LD_TEST_SRC_${concept} ${src})
  set(LD_TEST_NAME_${concept} ${dir}.${concept})
endforeach()
# built only over the CUDA mock (cuda_glue) or the emulator (cuda_launches,
# which counts launches): below
set(LD_TEST_ONLY_VARIANTS cuda_glue cuda_launches)
foreach(src ${LD_TEST_SRC})
  get_filename_component(stem ${src} NAME_WE)
  string(REGEX REPLACE "^test_" "" concept ${stem})
  if(concept IN_LIST LD_TEST_ONLY_VARIANTS)
    continue()
  endif()
  set(name ${LD_TEST_NAME_${concept}})
  add_executable(test_${concept} ${src})
  target_compile_definitions(test_${concept} PRIVATE ${LD_TEST_DEFS})
  target_link_libraries(test_${concept} PRIVATE ld_replay ld_parse Threads::Threads)
  add_test(NAME ${name} COMMAND test_${concept})
  set_tests_properties(${name} PROPERTIES LABELS cpu SKIP_RETURN_CODE 77)
endforeach()

# a lost wake-up in the thread pool hangs test_thread_pool: a minute (its
# run takes under a second) fails it rather than ctest's default 1500 s
set_tests_properties(${LD_TEST_NAME_thread_pool} PROPERTIES TIMEOUT 60)

# test_input writes compressed inputs and archives with libarchive itself
# (ld_parse opens it on first use, without linking it)
target_link_libraries(test_input PRIVATE PkgConfig::ARCHIVE)

# logdiff watch's metrics (cmd/watch/metrics*.c) belong to the logdiff
# executable, in no library: their test compiles them in, with
# libmicrohttpd where the build has it; metrics_sample prints the render of
# the test's known calls for the checks of docs/ops/ (tests/docs/ops/).
file(GLOB LD_WATCH_METRICS_SRC CONFIGURE_DEPENDS cmd/watch/metrics*.c)
target_sources(test_metrics PRIVATE ${LD_WATCH_METRICS_SRC})
# --shard (cmd/common/shard.c) belongs to the logdiff executable likewise
target_sources(test_shard PRIVATE ${CMAKE_SOURCE_DIR}/cmd/common/shard.c)
ld_use_microhttpd(test_metrics)
add_executable(watch_metrics_sample tests/cmd/watch/metrics_sample.c ${LD_WATCH_METRICS_SRC})
target_link_libraries(watch_metrics_sample PRIVATE ld_base Threads::Threads)
ld_use_microhttpd(watch_metrics_sample)
# docs/ops/: the dashboard's and the alerts' queries against that render,
# the alerting rules through promtool (check rules, and their unit tests),
# the systemd unit through systemd-analyze verify; each skips (77) saying
# which tool is missing
add_test(NAME docs.ops.dashboard
         COMMAND python3 ${CMAKE_SOURCE_DIR}/tests/docs/ops/check_dashboard.py
                 $<TARGET_FILE:watch_metrics_sample> ${CMAKE_SOURCE_DIR}/docs/ops)
add_test(NAME docs.ops.alerts COMMAND bash ${CMAKE_SOURCE_DIR}/tests/docs/ops/alerts.sh)
add_test(NAME docs.ops.service COMMAND bash ${CMAKE_SOURCE_DIR}/tests/docs/ops/service.sh)
set_tests_properties(docs.ops.dashboard docs.ops.alerts docs.ops.service PROPERTIES
  LABELS cpu SKIP_RETURN_CODE 77 ENVIRONMENT "${LD_CLI_TEST_ENV}")
# docs/cluster/ (issue 33's recipes; tests/cli/regress_slurm.sh runs the Slurm one on a real
# cluster): the Slurm scripts parse and their #SBATCH lines are sbatch's, the Kubernetes
# manifests through kubernetes-validate, the GitHub workflow through check-jsonschema, the
# fields each recipe rests on; each also made to fail on broken copies; each skips (77)
# saying which tool is missing
add_test(NAME docs.cluster.slurm COMMAND bash ${CMAKE_SOURCE_DIR}/tests/docs/cluster/slurm_scripts.sh)
add_test(NAME docs.cluster.kubernetes COMMAND python3 ${CMAKE_SOURCE_DIR}/tests/docs/cluster/check_kubernetes.py)
add_test(NAME docs.cluster.github COMMAND python3 ${CMAKE_SOURCE_DIR}/tests/docs/cluster/check_github.py)
set_tests_properties(docs.cluster.slurm docs.cluster.kubernetes docs.cluster.github PROPERTIES
  LABELS cpu SKIP_RETURN_CODE 77 ENVIRONMENT "${LD_CLI_TEST_ENV}")

# the CUDA DeepSeek kernels' checks, one op group a test as kernels/cuda/
set(LD_CUDA_DS_TESTS cuda_moe cuda_mla cuda_route cuda_hc cuda_sample cuda_ds4)

# The GPU-only checks (skip, 77, without a device or without CUDA): label
# gpu (and cuda, the style guide's name), not cpu, so that `ctest -L cpu`
# leaves them out and tools/gpu-check.sh runs `ctest -L gpu`.
foreach(concept cuda_ops ${LD_CUDA_DS_TESTS} cuda_determinism)
  set_tests_properties(${LD_TEST_NAME_${concept}} PROPERTIES LABELS "gpu;cuda")
endforeach()

# ld_test_variant(CONCEPT VARIANT OBJLIB): test_<concept>.c built again over
# the objects OBJLIB (the CUDA mock or emulator) as test_<concept>_<variant>;
# with VARIANT "" the executable keeps the plain name (a test that has no
# other build).
function(ld_test_variant concept variant objlib)
  set(exe test_${concept})
  if(variant)
    set(exe test_${concept}_${variant})
  endif()
  add_executable(${exe} ${LD_TEST_SRC_${concept}} $<TARGET_OBJECTS:${objlib}>)
  target_compile_definitions(${exe} PRIVATE ${LD_TEST_DEFS})
  target_link_libraries(${exe} PRIVATE ld_replay ld_parse Threads::Threads)
endfunction()

# ld_cli_variant(SCRIPT NAME LOGDIFF_TARGET [ENV...]): tests/cli/SCRIPT.sh
# run against another build of logdiff.
function(ld_cli_variant script name target)
  add_test(NAME ${name} COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cli/${script}.sh)
  set(env "LOGDIFF=$<TARGET_FILE:${target}>;${LD_CLI_TEST_ENV}")
  if(ARGN)
    set(env "${ARGN};${env}")
  endif()
  set_tests_properties(${name} PROPERTIES LABELS cpu SKIP_RETURN_CODE 77 ENVIRONMENT "${env}")
endfunction()

# the op table's checks' cuda-ref / cuda-custom cases, by case name (their
# filter is a substring): <name>.<variant>.<case>
set(LD_BACKEND_OPS_CUDA_CASES test_ops_cuda test_split_cuda test_f8b_refusals_cuda)
set(LD_BACKEND_DS_OPS_CUDA_CASES test_ds_ops_cuda test_ds4_ops_cuda)
function(ld_backend_ops_cases variant labels)
  foreach(concept backend_ops backend_ds_ops)
    string(TOUPPER ${concept} up)
    foreach(cases ${LD_${up}_CUDA_CASES})
      string(REGEX REPLACE "^test_" "" short ${cases})
      set(name ${LD_TEST_NAME_${concept}}.${variant}.${short})
      add_test(NAME ${name} COMMAND test_${concept}_${variant} ${cases})
      set_tests_properties(${name} PROPERTIES LABELS "${labels}" SKIP_RETURN_CODE 77)
    endforeach()
  endforeach()
endfunction()

# The CUDA backend's host code on the CPU: engine/backend/cuda/*.c compiled
# a second time with LD_CUDA_MOCK (its CUDA section on without the toolkit)
# over tests/support/cuda_mock.c, a host implementation of
# kernels/cuda/cuda_ops.h that checks every device range.  No nvcc needed,
# ld_kernels_cuda not used: these objects define every symbol of the
# backend's files and cuda_ops.h, so the archives' versions are never pulled
# in.  Label cpu.
file(GLOB LD_CUDA_BACKEND_SRC CONFIGURE_DEPENDS engine/backend/cuda/*.c)
file(GLOB LD_CUDA_MOCK_SRC CONFIGURE_DEPENDS tests/support/cuda_mock*.c)
add_library(ld_cuda_mock OBJECT ${LD_CUDA_BACKEND_SRC} ${LD_CUDA_MOCK_SRC})
target_compile_definitions(ld_cuda_mock PRIVATE LD_CUDA_MOCK=1)
target_link_libraries(ld_cuda_mock PUBLIC ld_replay ld_parse Threads::Threads)
ld_test_variant(cuda_glue "" ld_cuda_mock)
target_compile_definitions(test_cuda_glue PRIVATE LD_CUDA_MOCK=1)
add_test(NAME ${LD_TEST_NAME_cuda_glue} COMMAND test_cuda_glue)
set_tests_properties(${LD_TEST_NAME_cuda_glue} PROPERTIES LABELS cpu SKIP_RETURN_CODE 77)
foreach(concept backend_ops backend_ds_ops cuda_determinism ${LD_CUDA_DS_TESTS} cuda_ops)
  ld_test_variant(${concept} mock ld_cuda_mock)
  target_compile_definitions(test_${concept}_mock PRIVATE LD_CUDA_MOCK=1)
  if(NOT concept MATCHES "^backend_(ds_)?ops$")
    add_test(NAME ${LD_TEST_NAME_${concept}}.mock COMMAND test_${concept}_mock)
    set_tests_properties(${LD_TEST_NAME_${concept}}.mock PROPERTIES LABELS cpu SKIP_RETURN_CODE 77)
  endif()
endforeach()
ld_backend_ops_cases(mock cpu)
# logdiff itself over the mock: tests/cli/replay_cuda.sh (replay --backend
# cuda --check ref, --compare-kernels), and the split too
# (replay_cuda_tp.sh, replay_tp_procs.sh): its ranks, threads sharing the
# mock's device or processes over shm, call the mock from several threads.
add_executable(logdiff_cuda_mock ${LD_CMD_SRC} $<TARGET_OBJECTS:ld_cuda_mock>)
target_link_libraries(logdiff_cuda_mock PRIVATE ld_replay ld_parse Threads::Threads)
ld_use_microhttpd(logdiff_cuda_mock)
foreach(script replay_cuda replay_cuda_tp replay_tp_procs)
  ld_cli_variant(${script} cli.${script}.mock logdiff_cuda_mock)
endforeach()

# The CUDA kernels themselves on the CPU (tests/support/cuda_emu):
# kernels/cuda/*.cu rewritten by launches.pl (a launch becomes a call) and
# compiled by the host C++ compiler with cuda_emu.cuh, a block's threads run
# as fibers between barriers (emu_sched.c) over host memory
# (emu_runtime.c).  The kernel suites then test every kernel against the
# plain-C reference in CI, under the sanitizers, without a GPU.  Needs the
# CUDA toolkit's headers (not nvcc, not a device), perl and a C++ compiler;
# label cpu.
find_package(CUDAToolkit QUIET)
find_program(LD_PERL perl)
include(CheckLanguage)
check_language(CXX)
set(LD_EMU_DIR ${CMAKE_SOURCE_DIR}/tests/support/cuda_emu)
if(CUDAToolkit_FOUND AND LD_PERL AND CMAKE_CXX_COMPILER AND NOT LOGDIFF_FUZZ)
  enable_language(CXX)
  set(CMAKE_CXX_STANDARD 17)
  set(CMAKE_CXX_STANDARD_REQUIRED ON)
  set(CMAKE_CXX_FLAGS_RELWITHDEBINFO "-O2 -g")
  # build/cuda_emu/<name>.cc from a .cu: launches.pl's rewrite, compiled
  # with cuda_emu.cuh.  The kernels' rounding is nvcc's --fmad=false: no
  # contraction to fma; their warnings nvcc's -Wall -Wextra (cuda_fp16.h's
  # `half` is global).
  function(ld_emu_source cu out)
    get_filename_component(name ${cu} NAME_WE)
    set(cc ${CMAKE_BINARY_DIR}/cuda_emu/${name}.cc)
    add_custom_command(OUTPUT ${cc}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/cuda_emu
      COMMAND ${LD_PERL} ${LD_EMU_DIR}/launches.pl ${cu} ${cc}
      DEPENDS ${cu} ${LD_EMU_DIR}/launches.pl VERBATIM)
    set_source_files_properties(${cc} PROPERTIES
      OBJECT_DEPENDS ${LD_EMU_DIR}/cuda_emu.cuh
      COMPILE_OPTIONS "-include;${LD_EMU_DIR}/cuda_emu.cuh;-ffp-contract=off;-Wno-unknown-pragmas;-Wno-shadow")
    set(${out} ${cc} PARENT_SCOPE)
  endfunction()
  file(GLOB LD_EMU_CU CONFIGURE_DEPENDS kernels/cuda/*.cu)
  set(LD_EMU_CC "")
  foreach(cu ${LD_EMU_CU})
    ld_emu_source(${cu} cc)
    list(APPEND LD_EMU_CC ${cc})
  endforeach()
  set(LD_EMU_RUNTIME ${LD_EMU_DIR}/emu_sched.c ${LD_EMU_DIR}/emu_census.c
      ${LD_EMU_DIR}/emu_runtime.c ${LD_EMU_DIR}/emu_graph.c)
  add_library(ld_cuda_emu OBJECT ${LD_CUDA_BACKEND_SRC} ${LD_EMU_CC} ${LD_EMU_RUNTIME})
  target_compile_definitions(ld_cuda_emu PRIVATE LD_CUDA_EMU=1)
  # the rewritten kernels (in the build folder) find their siblings' headers
  target_include_directories(ld_cuda_emu PRIVATE kernels/cuda ${LD_EMU_DIR})
  target_include_directories(ld_cuda_emu SYSTEM PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
  target_link_libraries(ld_cuda_emu PUBLIC ld_replay ld_parse Threads::Threads)
  # NCCL over the emulated devices (emu_nccl.c: the ranks threads of this
  # process): engine/tp/comm_nccl.c compiled a second time with LD_HAVE_NCCL
  # over it, so the tensor-parallel group's communicator runs in CI; these
  # objects define comm_nccl.c's symbols, so neither the archive's
  # comm_nccl.o nor libnccl is used.  Needs nccl.h only.
  find_path(LD_EMU_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  if(LD_EMU_NCCL_INCLUDE_DIR)
    target_sources(ld_cuda_emu PRIVATE ${LD_EMU_DIR}/emu_comm_nccl.c ${LD_EMU_DIR}/emu_nccl.c)
    target_include_directories(ld_cuda_emu SYSTEM PRIVATE ${LD_EMU_NCCL_INCLUDE_DIR})
  else()
    message(STATUS "CUDA emulator: no nccl.h, its tensor-parallel tests skip")
  endif()
  # the scheduler's own bookkeeping unchecked by AddressSanitizer (a third
  # of an instrumented run), its switches still announced to it
  if(LOGDIFF_SANITIZE MATCHES "address")
    set_source_files_properties(${LD_EMU_DIR}/emu_sched.c PROPERTIES
      COMPILE_OPTIONS "-fno-sanitize=address;-DLD_EMU_ASAN=1")
  endif()
  function(ld_emu_test concept)
    if(concept STREQUAL "cuda_launches")
      ld_test_variant(${concept} "" ld_cuda_emu)
      set(exe test_${concept})
    else()
      ld_test_variant(${concept} emu ld_cuda_emu)
      set(exe test_${concept}_emu)
    endif()
    set_target_properties(${exe} PROPERTIES LINKER_LANGUAGE CXX)
    target_include_directories(${exe} PRIVATE ${LD_EMU_DIR})
    target_compile_definitions(${exe} PRIVATE LD_CUDA_EMU=1)
  endfunction()
  foreach(concept cuda_ops ${LD_CUDA_DS_TESTS} cuda_determinism backend_ops backend_ds_ops cuda_launches tp)
    ld_emu_test(${concept})
  endforeach()
  foreach(concept cuda_ops ${LD_CUDA_DS_TESTS} cuda_determinism)
    add_test(NAME ${LD_TEST_NAME_${concept}}.emu COMMAND test_${concept}_emu)
    set_tests_properties(${LD_TEST_NAME_${concept}}.emu PROPERTIES LABELS "cpu;emu" SKIP_RETURN_CODE 77)
  endforeach()
  add_test(NAME ${LD_TEST_NAME_cuda_launches} COMMAND test_cuda_launches)
  set_tests_properties(${LD_TEST_NAME_cuda_launches} PROPERTIES LABELS "cpu;emu" SKIP_RETURN_CODE 77)
  # tensor parallelism over NCCL on two emulated GPUs (test_tp.c's CUDA case;
  # its other cases are the CPU build's)
  if(LD_EMU_NCCL_INCLUDE_DIR) # its case on the emulator's NCCL itself
    target_compile_definitions(test_tp_emu PRIVATE LD_EMU_HAVE_NCCL=1)
    target_include_directories(test_tp_emu SYSTEM PRIVATE ${LD_EMU_NCCL_INCLUDE_DIR}
                               ${CUDAToolkit_INCLUDE_DIRS})
  endif()
  add_test(NAME ${LD_TEST_NAME_tp}.emu COMMAND test_tp_emu test_tp_cuda)
  set_tests_properties(${LD_TEST_NAME_tp}.emu PROPERTIES LABELS "cpu;emu" SKIP_RETURN_CODE 77
    ENVIRONMENT "LD_CUDA_EMU_DEVICES=2")
  # whole sessions replayed (minutes under the sanitizers, whose kernels the
  # other suites cover): tools/setup.sh leaves it to the plain build
  set_tests_properties(${LD_TEST_NAME_cuda_determinism}.emu PROPERTIES LABELS "cpu;emu;emu_long")
  # the kernel suites again with threads and blocks last first (emu_sched.h:
  # a race between two barriers passes in at most one order), and with expf,
  # sinf, cosf, log1pf and exp as far off as the device's may be
  # (cuda_emu.cuh: a check stricter than the device's maths allow fails)
  foreach(concept cuda_ops ${LD_CUDA_DS_TESTS})
    set(name ${LD_TEST_NAME_${concept}}.emu)
    add_test(NAME ${name}_reverse COMMAND test_${concept}_emu)
    set_tests_properties(${name}_reverse PROPERTIES LABELS "cpu;emu;emu_long"
      SKIP_RETURN_CODE 77 ENVIRONMENT "LD_CUDA_EMU_ORDER=reverse")
    # the kernels suite's op table only: its models and its tensor-core GEMM
    # add minutes, and no transcendental the table does not reach
    set(only "")
    if(concept STREQUAL "cuda_ops")
      set(only test_cuda_ops_table)
    endif()
    add_test(NAME ${name}_ulp COMMAND test_${concept}_emu ${only})
    set_tests_properties(${name}_ulp PROPERTIES LABELS "cpu;emu;emu_long"
      SKIP_RETURN_CODE 77 ENVIRONMENT "LD_CUDA_EMU_MATHS=ulp")
  endforeach()
  ld_backend_ops_cases(emu "cpu;emu")
  # the emulator's own test: tests/support/cuda_emu/emu_check.cu, rewritten likewise
  ld_emu_source(${LD_EMU_DIR}/emu_check.cu cc)
  add_executable(test_cuda_emu_check ${cc} ${LD_EMU_RUNTIME})
  target_include_directories(test_cuda_emu_check PRIVATE ${LD_INCLUDE_ROOTS} ${LD_EMU_DIR})
  target_include_directories(test_cuda_emu_check SYSTEM PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
  add_test(NAME support.cuda_emu.check COMMAND test_cuda_emu_check)
  set_tests_properties(support.cuda_emu.check PROPERTIES LABELS "cpu;emu")
  add_test(NAME support.cuda_emu.check_reverse COMMAND test_cuda_emu_check)
  set_tests_properties(support.cuda_emu.check_reverse PROPERTIES LABELS "cpu;emu"
    ENVIRONMENT "LD_CUDA_EMU_ORDER=reverse")
  add_executable(logdiff_cuda_emu ${LD_CMD_SRC} $<TARGET_OBJECTS:ld_cuda_emu>)
  set_target_properties(logdiff_cuda_emu PROPERTIES LINKER_LANGUAGE CXX)
  target_link_libraries(logdiff_cuda_emu PRIVATE ld_replay ld_parse Threads::Threads)
  ld_use_microhttpd(logdiff_cuda_emu)
  # the CLI on the emulator; the split over two emulated GPUs and the
  # emulator's NCCL, one process or each rank a process (--tp-rank, the
  # emulator's NCCL joining them through the rendezvous file)
  ld_cli_variant(replay_cuda cli.replay_cuda.emu logdiff_cuda_emu)
  foreach(script replay_cuda_tp replay_tp_procs)
    ld_cli_variant(${script} cli.${script}.emu logdiff_cuda_emu LD_CUDA_EMU_DEVICES=2)
  endforeach()
  # whole replays through the emulated kernels: 1.5-4.5 minutes each under
  # the sanitizers, whose kernels the suites above check there and whose
  # host side the .mock variants do; tools/setup.sh leaves them to the plain build
  foreach(script replay_cuda replay_cuda_tp replay_tp_procs)
    set_tests_properties(cli.${script}.emu PROPERTIES LABELS "cpu;emu;emu_long")
  endforeach()
else()
  message(STATUS "CUDA emulator tests off: they need the CUDA toolkit's headers, perl and a C++ compiler")
endif()

# Fuzz targets: tests/fuzz/fuzz_<format>.c.  Their corpus always replays as a
# plain test (under the sanitizers in CI); with LOGDIFF_FUZZ=ON (clang) a
# real libFuzzer binary is built too.
file(GLOB LD_FUZZ_SRC CONFIGURE_DEPENDS tests/fuzz/fuzz_*.c)
foreach(src ${LD_FUZZ_SRC})
  get_filename_component(name ${src} NAME_WE)
  string(REGEX REPLACE "^fuzz_" "" fmt ${name})
  add_executable(replay_${name} ${src} tests/fuzz/replay_main.c)
  target_link_libraries(replay_${name} PRIVATE ld_replay ld_parse)
  add_test(NAME fuzz.${fmt}
           COMMAND replay_${name} ${CMAKE_SOURCE_DIR}/tests/fuzz/corpus/${fmt})
  set_tests_properties(fuzz.${fmt} PROPERTIES LABELS cpu)
  if(LOGDIFF_FUZZ)
    add_executable(${name} ${src})
    target_compile_options(${name} PRIVATE -fsanitize=fuzzer)
    target_link_options(${name} PRIVATE -fsanitize=fuzzer)
    target_link_libraries(${name} PRIVATE ld_replay ld_parse)
  endif()
endforeach()
# logdiff watch's state file (cmd/watch/watch_state_io.c) belongs to the
# logdiff executable, in no library: its target compiles the files it needs in
set(LD_WATCH_STATE_SRC cmd/watch/watch_state_io.c cmd/watch/watch_state_records.c cmd/common/outfile.c)
target_sources(replay_fuzz_watchstate PRIVATE ${LD_WATCH_STATE_SRC})
if(LOGDIFF_FUZZ)
  target_sources(fuzz_watchstate PRIVATE ${LD_WATCH_STATE_SRC})
endif()
# the partials of logdiff regress are read by code of the executable
# (cmd/regress/): their target compiles it in
set(LD_PARTIAL_SRC ${CMAKE_SOURCE_DIR}/cmd/regress/regress_partial.c
    ${CMAKE_SOURCE_DIR}/cmd/regress/regress_partial_read.c ${CMAKE_SOURCE_DIR}/cmd/regress/regress_run.c
    ${CMAKE_SOURCE_DIR}/cmd/regress/regress_lines.c)
target_sources(replay_fuzz_partial PRIVATE ${LD_PARTIAL_SRC})
target_sources(replay_fuzz_journal PRIVATE ${LD_PARTIAL_SRC} ${CMAKE_SOURCE_DIR}/cmd/regress/regress_journal.c)
if(LOGDIFF_FUZZ)
  target_sources(fuzz_partial PRIVATE ${LD_PARTIAL_SRC})
  target_sources(fuzz_journal PRIVATE ${LD_PARTIAL_SRC} ${CMAKE_SOURCE_DIR}/cmd/regress/regress_journal.c)
endif()

# CLI tests: tests/cli/<case>.sh run with $LOGDIFF pointing at the binary.
file(GLOB LD_CLI_TESTS CONFIGURE_DEPENDS tests/cli/*.sh)
foreach(script ${LD_CLI_TESTS})
  get_filename_component(name ${script} NAME_WE)
  ld_cli_variant(${name} cli.${name} logdiff)
endforeach()

add_test(NAME tools.layering
         COMMAND bash ${CMAKE_SOURCE_DIR}/tools/check-layering.sh ${CMAKE_SOURCE_DIR})
set_tests_properties(tools.layering PROPERTIES LABELS cpu)

# No new circle of calls between the library's .c files (from the objects'
# symbols, against tools/cycles-allowed.txt); runs on the objects this build
# made, so after the build.
add_test(NAME tools.cycles
         COMMAND python3 ${CMAKE_SOURCE_DIR}/tools/check-cycles.py ${CMAKE_BINARY_DIR})
set_tests_properties(tools.cycles PROPERTIES LABELS cpu)

# the two checks above can fail: each on a small tree or objects made to break it
add_test(NAME tools.checks COMMAND bash ${CMAKE_SOURCE_DIR}/tests/tools/checks.sh)
set_tests_properties(tools.checks PROPERTIES LABELS cpu ENVIRONMENT "LD_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
