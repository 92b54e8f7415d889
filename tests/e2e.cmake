# End-to-end tests of the real `heteroflow` binary (included by
# tests/CMakeLists.txt). Scripts live beside this file.

# The tests use Debian's python3 packages (python3-prometheus-client), so
# prefer the system interpreter over any other python3 on PATH.
if(EXISTS /usr/bin/python3 AND NOT Python3_EXECUTABLE)
  set(Python3_EXECUTABLE /usr/bin/python3)
endif()
find_package(Python3 COMPONENTS Interpreter)
set(HF_TESTS_DIR ${CMAKE_CURRENT_SOURCE_DIR})
# The trace is not in this repository: CI clones the repository next to a copy
# of shared/, so this relative path holds there as it does in the workspace.
set(HF_OPENB_DIR "${CMAKE_SOURCE_DIR}/../shared/traces/alibaba-openb"
    CACHE PATH "Folder with the Alibaba openb trace CSVs")

if(TARGET heteroflow)
  # hf_e2e_test(NAME COMMAND ...): one ctest test with the simulator's labels.
  function(hf_e2e_test name)
    add_test(NAME ${name} COMMAND ${ARGN})
    set_tests_properties(${name} PROPERTIES TIMEOUT 60 LABELS "e2e;sim")
  endfunction()

  # Bad input: exit 2, message naming the file (and line).
  foreach(case missing_file malformed_row unknown_column negative_request non_integer
               bad_node_row gpu_milli_too_large replay_without_times bad_tune unknown_method
               unknown_flag no_input bad_policy bad_yaml_workload gangs_out_of_range
               gangs_without_replay bad_gang_sizes bad_queueing bad_backfill bad_teams bad_cluster
               teams_with_fgd unknown_queue bad_queue_tree)
    hf_e2e_test(sim_bad_input_${case} bash ${HF_TESTS_DIR}/sim_bad_input.sh
                $<TARGET_FILE:heteroflow> ${case})
  endforeach()

  if(Python3_Interpreter_FOUND)
    set(py ${Python3_EXECUTABLE})
    hf_e2e_test(sim_checker_selftest ${py} ${HF_TESTS_DIR}/check_placements_selftest.py)

    # The YAML example: the designed outcome (see the comment at its top).
    set(example ${CMAKE_SOURCE_DIR}/examples/sim/small-cluster.yaml)
    hf_e2e_test(sim_example_small_cluster_replay bash ${HF_TESTS_DIR}/sim_json.sh ${py}
                $<TARGET_FILE:heteroflow> --workload ${example} --method replay --
                --method replay --eq pods_total=18 --eq pods_scheduled=16 --eq pods_failed=2
                --eq preemptions=4 --eq dropped_pending=1)
    # Gangs against the deadlock of members placed one by one (docs/JOBS.md).
    set(gangs ${CMAKE_SOURCE_DIR}/examples/sim/gang-deadlock.yaml)
    hf_e2e_test(sim_example_gangs bash ${HF_TESTS_DIR}/sim_json.sh ${py}
                $<TARGET_FILE:heteroflow> --workload ${gangs} --method replay --
                --method replay --eq jobs=2 --eq jobs_completed=2 --eq jobs_partial_at_end=0
                --eq gpu_seconds_held_by_partial_gangs=0 --eq pods_scheduled=4)
    hf_e2e_test(sim_example_no_gang_deadlock bash ${HF_TESTS_DIR}/sim_json.sh ${py}
                $<TARGET_FILE:heteroflow> --workload ${gangs} --method replay --no-gang --
                --method replay --eq jobs=2 --eq jobs_completed=0 --eq jobs_partial_at_end=2
                --min gpu_seconds_held_by_partial_gangs=9.9 --eq pods_scheduled=2)
    # Queues (docs/QUEUES.md): backfill against starvation, fair share over a day.
    hf_e2e_test(sim_queues ${py} ${HF_TESTS_DIR}/sim_queues.py $<TARGET_FILE:heteroflow>
                ${CMAKE_SOURCE_DIR}/examples/sim/backfill.yaml)
    set_tests_properties(sim_queues PROPERTIES TIMEOUT 300)
    hf_e2e_test(sim_example_small_cluster_fgd bash ${HF_TESTS_DIR}/sim_json.sh ${py}
                $<TARGET_FILE:heteroflow> --workload ${example} --method fgd --seed 7 --
                --method fgd --eq nodes=6 --eq gpus_total=32)

    if(EXISTS ${HF_OPENB_DIR}/openb_node_list_gpu_node.csv)
      set(gpu_nodes ${HF_OPENB_DIR}/openb_node_list_gpu_node.csv)
      file(GLOB pod_lists ${HF_OPENB_DIR}/openb_pod_list_*.csv
           ${HF_OPENB_DIR}/extra-removed-variants/openb_pod_list_*.csv)
      list(SORT pod_lists)
      # Every pod list variant: fgd at the paper's settings, placements
      # re-checked by the independent checker.
      foreach(pods ${pod_lists})
        get_filename_component(variant ${pods} NAME_WE)
        string(REPLACE "openb_pod_list_" "" variant ${variant})
        hf_e2e_test(sim_fgd_${variant} bash ${HF_TESTS_DIR}/run_sim_variant.sh ${py}
                    $<TARGET_FILE:heteroflow> ${gpu_nodes} ${pods} fgd)
      endforeach()
      set(default_pods ${HF_OPENB_DIR}/openb_pod_list_default.csv)
      hf_e2e_test(sim_replay_default bash ${HF_TESTS_DIR}/run_sim_variant.sh ${py}
                  $<TARGET_FILE:heteroflow> ${gpu_nodes} ${default_pods} replay)
      # CPU-only nodes in the cluster and a different seed and tune.
      hf_e2e_test(sim_fgd_all_nodes_seed51 bash ${HF_TESTS_DIR}/run_sim_variant.sh ${py}
                  $<TARGET_FILE:heteroflow> ${HF_OPENB_DIR}/openb_node_list_all_node.csv
                  ${default_pods} fgd --seed 51 --tune 1.0)
      hf_e2e_test(sim_json_default bash ${HF_TESTS_DIR}/sim_json.sh ${py}
                  $<TARGET_FILE:heteroflow> --nodes ${gpu_nodes} --pods ${default_pods}
                  --method fgd --tune 1.3 --seed 42 --
                  --method fgd --eq nodes=1213 --eq gpus_total=6212 --eq seed=42
                  --min gpu_alloc_ratio_at_arrived_100=0.85)
      hf_e2e_test(sim_openb_gangs bash ${HF_TESTS_DIR}/sim_openb_gangs.sh ${py}
                  $<TARGET_FILE:heteroflow> ${gpu_nodes} ${default_pods})
      hf_e2e_test(sim_deterministic bash ${HF_TESTS_DIR}/sim_determinism.sh
                  $<TARGET_FILE:heteroflow> ${gpu_nodes} ${default_pods})
    else()
      message(STATUS "openb trace not found in ${HF_OPENB_DIR}: skipping the trace tests")
    endif()
  else()
    message(STATUS "python3 not found: skipping the simulator's checker tests")
  endif()
endif()

# The control-plane server: auth, plugins, scheduler config, persistence.
if(TARGET heteroflow AND Python3_Interpreter_FOUND)
  add_test(NAME server_smoke
           COMMAND ${Python3_EXECUTABLE} ${HF_TESTS_DIR}/server_smoke.py $<TARGET_FILE:heteroflow>)
  set_tests_properties(server_smoke PROPERTIES TIMEOUT 60 LABELS "e2e;server")
  # The kubectl-style client against the real server.
  add_test(NAME client_e2e
           COMMAND ${Python3_EXECUTABLE} ${HF_TESTS_DIR}/client_e2e.py $<TARGET_FILE:heteroflow>)
  set_tests_properties(client_e2e PROPERTIES TIMEOUT 120 LABELS "e2e;client")
endif()

# The API's end-to-end acceptance tests (tests/api/): the vision's curl calls,
# a corpus of malformed requests, tasks, a crash mid-burst, metrics, the
# scheduler preview, the demo cluster, the event stream and OpenAPI. Each starts the real binary on a temporary data dir.
# hf_api_tests(NAME:TIMEOUT ...): api_NAME runs tests/api/test_NAME.py on the binary.
function(hf_api_tests)
  foreach(case ${ARGN})
    string(REPLACE ":" ";" parts ${case})
    list(GET parts 0 name)
    list(GET parts 1 timeout)
    add_test(NAME api_${name}
             COMMAND ${Python3_EXECUTABLE} ${HF_TESTS_DIR}/api/test_${name}.py
                     $<TARGET_FILE:heteroflow>)
    set_tests_properties(api_${name} PROPERTIES TIMEOUT ${timeout} LABELS "e2e;server")
  endforeach()
endfunction()
if(TARGET heteroflow AND Python3_Interpreter_FOUND)
  hf_api_tests(vision:60 malformed:120 tasks:120 crash:120 metrics:60 preview:60 demo:60 events:60
               agent_protocol:90 agent:90 agent_failover:90 agent_preemption:120 jobs:240 queues:120
               scheduling:120 security:180 fencing:180 flood:180 inference:300 ui_static:60
               demo_restart:240 vendors:120 postgres:120 ha:400 ha_promotion:180)
endif()

# The web UI (docs/UI.md): its own unit tests (vitest), and browser tests in
# Debian's chromium against the real server serving the built UI (web/e2e/),
# which leave screenshots of every page in build/ui-screenshots/.
if(HF_UI_BUILT)
  add_test(NAME ui_unit COMMAND ${HF_NPM} test --silent WORKING_DIRECTORY ${HF_WEB_DIR})
  set_tests_properties(ui_unit PROPERTIES TIMEOUT 180 LABELS "ui")
  find_program(HF_NODE node)
  if(TARGET heteroflow AND HF_NODE AND EXISTS ${HF_WEB_DIR}/e2e/run.mjs)
    add_test(NAME ui_browser
             COMMAND ${HF_NODE} ${HF_WEB_DIR}/e2e/run.mjs --binary $<TARGET_FILE:heteroflow>
                     --ui-dir ${HF_UI_DIR} --out ${CMAKE_BINARY_DIR}/ui-screenshots)
    set_tests_properties(ui_browser PROPERTIES TIMEOUT 600 LABELS "ui;e2e")
  endif()
  # Third-party clients from the same locked npm packages: the official
  # OpenAI SDK against the inference gateway, and Redocly's linter on the
  # served OpenAPI document.
  if(TARGET heteroflow AND HF_NODE AND Python3_Interpreter_FOUND)
    hf_api_tests(openai_sdk:120 openapi_lint:120)
  endif()
endif()

# Fuzzing (docs/SECURITY.md, "Fuzzing"): each libFuzzer target replays its
# saved crash inputs and then runs for 20 s. They are built with clang into
# build/fuzz by scripts/fuzz.sh (scripts/test.sh builds them before ctest, so
# the fuzz_build step here finds nothing to do).
find_program(HF_CLANGXX clang++)
if(HF_CLANGXX)
  set(hf_fuzz_script ${CMAKE_SOURCE_DIR}/scripts/fuzz.sh)
  add_test(NAME fuzz_build COMMAND ${hf_fuzz_script} --build-only)
  set_tests_properties(fuzz_build PROPERTIES TIMEOUT 1800 LABELS "fuzz" FIXTURES_SETUP fuzz_built
                                             RESOURCE_LOCK fuzz_build_dir)
  foreach(target api_json http_request policy_yaml inventory_yaml nvidia_smi vendor_smi openb_csv
                 workload_yaml manifest)
    add_test(NAME fuzz_${target} COMMAND ${hf_fuzz_script} --no-build --seconds 20 ${target})
    set_tests_properties(fuzz_${target} PROPERTIES TIMEOUT 120 LABELS "fuzz"
                                                   FIXTURES_REQUIRED fuzz_built)
  endforeach()
else()
  message(WARNING "clang++ not found: no fuzz tests (scripts/install-deps.sh installs it)")
endif()
