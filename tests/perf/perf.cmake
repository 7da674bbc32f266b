# Performance tools and tests (tests/perf). Included from tests/CMakeLists.txt. The tools are
# built with the project; the measurements are the scripts submit_latency.sh and head_load.sh,
# run by hand (see docs/PERFORMANCE.md). ctest registers them with LABELS perf so that a default
# run (ctest -LE "gpu|perf") skips them.
add_executable(agent_load ${CMAKE_CURRENT_LIST_DIR}/agent_load.c)
target_link_libraries(agent_load hv_rpc PkgConfig::UV)

add_executable(spawn_watch ${CMAKE_CURRENT_LIST_DIR}/spawn_watch.c)
target_link_libraries(spawn_watch hv_base)

hv_add_test(NAME perf.head_load COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/head_load.sh 100
            LABELS perf TIMEOUT 300)
hv_add_test(NAME perf.submit_latency COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/submit_latency.sh 10
            LABELS perf TIMEOUT 300)
set_tests_properties(hv.perf.head_load hv.perf.submit_latency PROPERTIES RUN_SERIAL TRUE
                     SKIP_RETURN_CODE 77)

# Elastic state sync (hv_state_sync) against a plain ring broadcast and a commit, 64 MiB and
# 512 MiB at 2 and 4 ranks (tests/perf/bench_sync.sh; forks its ranks over rdzv_file).
add_executable(bench_sync ${CMAKE_CURRENT_LIST_DIR}/bench_sync.c)
target_link_libraries(bench_sync PRIVATE hv_static)
hv_add_test(NAME perf.bench_sync
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/bench_sync.sh --quick --bin ${CMAKE_BINARY_DIR}/bin
  LABELS perf TIMEOUT 900)

# What a peer of a SIGKILLed worker can learn and when: a robust futex the victim held, against
# the socket EOF and waitpid (issue 27: the Python reset's detection; run by hand:
# bench_elastic_exit [--python]).
add_executable(bench_elastic_exit ${CMAKE_CURRENT_LIST_DIR}/bench_elastic_exit.c)

# Elastic reset latency through the real binaries: failure (SIGKILL of a worker), join and drain
# at 2..16 workers, with a breakdown (tests/perf/bench_elastic.sh; the worker is bench_elastic).
add_executable(bench_elastic ${CMAKE_CURRENT_LIST_DIR}/bench_elastic.c)
target_link_libraries(bench_elastic PRIVATE hv_static)
hv_add_test(NAME perf.bench_elastic
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/bench_elastic.sh --sizes "2 4" --resets 3 --drains 1
          --bin ${CMAKE_BINARY_DIR}/bin
  LABELS perf TIMEOUT 900)

# Node loss without notice (agent and worker SIGKILLed) to the next completed step, at 4 and 8
# workers with a 10 s lease (tests/perf/bench_node_loss.sh; the worker is bench_elastic).
hv_add_test(NAME perf.bench_node_loss
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/bench_node_loss.sh --sizes "4" --losses 3
          --bin ${CMAKE_BINARY_DIR}/bin
  LABELS perf TIMEOUT 300)

# Issue 28: a node's link set down in a network namespace (no FIN, no RST) to the next completed
# step, at 3 workers with the head's defaults (tests/perf/bench_silent_loss.sh); a one-worker
# job's node SIGKILLed to the step of its resume (bench_lone_loss.sh); and no false suspicion
# with the cores saturated and a long compute step, one minute (soak_silent.sh; ten minutes
# for the figures in docs/RELIABILITY.md). The netns ones skip (77) without ip netns.
hv_add_test(NAME perf.bench_silent_loss
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/bench_silent_loss.sh --sizes "3" --trials 3
          --bin ${CMAKE_BINARY_DIR}/bin
  LABELS perf TIMEOUT 300)
hv_add_test(NAME perf.bench_lone_loss
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/bench_lone_loss.sh --trials 3 --bin ${CMAKE_BINARY_DIR}/bin
  LABELS perf TIMEOUT 300)
hv_add_test(NAME perf.soak_silent
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/soak_silent.sh --minutes 1 --bin ${CMAKE_BINARY_DIR}/bin
  LABELS perf long TIMEOUT 300)
set_tests_properties(hv.perf.bench_silent_loss hv.perf.bench_lone_loss hv.perf.soak_silent
                     PROPERTIES RUN_SERIAL TRUE SKIP_RETURN_CODE 77)

# hv.torch (docs/python.md) against PyTorch's own: one training step of a BERT-base-sized
# gradient set with DistributedOptimizer against DistributedDataParallel on Gloo (here a 2-layer
# cut, 1 block each: the full model is tests/perf/bench_torch_bert.sh's default), and the reset
# latency of a Python elastic job (bench_elastic.sh --python). Exit 77 (skip) without torch.
hv_add_test(NAME perf.bench_torch_bert
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/bench_torch_bert.sh --build ${CMAKE_BINARY_DIR}
          --layers 2 --reps 2 --steps 1
  LABELS perf TIMEOUT 300)
hv_add_test(NAME perf.bench_elastic_python
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/bench_elastic.sh --python --sizes "2" --resets 2
          --drains 1 --bin ${CMAKE_BINARY_DIR}/bin
  LABELS perf TIMEOUT 600)
set_tests_properties(hv.perf.bench_torch_bert hv.perf.bench_elastic_python PROPERTIES
                     RUN_SERIAL TRUE SKIP_RETURN_CODE 77)

# Actors: create to the first call served, for 1 actor and for N created back to back across 4
# agents, from one C program (bench_actor_create: Actors.Create, then hv_actor_lookup and a call
# per actor) and through the CLI (hvctl actor create, examples/actor_call @NAME), in one run
# (tests/perf/bench_actor_create.sh). --quick: N=20; the figures in docs/actors.md are N=100.
add_executable(bench_actor_create ${CMAKE_CURRENT_LIST_DIR}/bench_actor_create.c)
target_include_directories(bench_actor_create PRIVATE
  $<TARGET_PROPERTY:hv_base,INTERFACE_INCLUDE_DIRECTORIES>
  $<TARGET_PROPERTY:hv_proto,INTERFACE_INCLUDE_DIRECTORIES>)
target_link_libraries(bench_actor_create PRIVATE hv_static)
hv_add_test(NAME perf.bench_actor_create
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/bench_actor_create.sh --quick --bin ${CMAKE_BINARY_DIR}
  LABELS perf TIMEOUT 300)
set_tests_properties(hv.perf.bench_actor_create PROPERTIES RUN_SERIAL TRUE)

# Many jobs on one cluster (issue 26): the fleet policy (head/core/fleet.c) against first come,
# first served and a static partition, simulated over seeded workloads (tests/perf/fleetsim.c;
# --print-workload prints one as hvsubmit lines). The tables: tests/perf/fleetsim.sh and
# tests/perf/bench_fleet.sh (seconds: no process, no clock).
add_executable(fleetsim ${CMAKE_CURRENT_LIST_DIR}/fleetsim.c)
target_include_directories(fleetsim PRIVATE ${CMAKE_SOURCE_DIR}/head/core)
target_link_libraries(fleetsim PRIVATE hv_headcore m)
hv_add_test(NAME perf.fleetsim
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/fleetsim.sh --seeds 5 --build ${CMAKE_BINARY_DIR}
  LABELS perf TIMEOUT 300)
# The same over 10 seeds with issue 26's goals checked, one command (a second).
hv_add_test(NAME perf.bench_fleet
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/bench_fleet.sh --seeds 10 --build ${CMAKE_BINARY_DIR}
  LABELS perf TIMEOUT 120)

# Issue 28: real spot traces (../shared/data/spot-traces) as spot-sim schedules, for
# tests/perf/bench_spot.sh --trace; spot_trace.sh checks the schedule of a small trace and the
# errors on bad ones (a few seconds).
add_executable(spot_trace ${CMAKE_CURRENT_LIST_DIR}/spot_trace.c)
target_link_libraries(spot_trace m)
hv_add_test(NAME perf.spot_trace
  COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/spot_trace_test.sh $<TARGET_FILE:spot_trace>
  LABELS perf TIMEOUT 60)
