# The layering of src/: which folders each folder's files (tests included)
# may include from. Nothing includes upwards:
#   core <- framework <- plugins <- scheduler <- inference <- server
#   store sits under scheduler; http (transport only) under inference,
#   server, cli and agent; sim and cli and agent are leaves.
# docs/ARCHITECTURE.md draws the same picture.
#
# Used two ways:
#   include(cmake/layers.cmake) then hf_check_layers(${CMAKE_SOURCE_DIR}/src)
#     at configure time (CMakeLists.txt), which stops the configure at the
#     first include that breaks the table, naming the file and line;
#   cmake -DHF_SRC=DIR -P cmake/layers.cmake
#     to check another tree (tests/layers_test.sh plants a bad include in a
#     copy of src/ and expects the check to fail).
set(HF_LAYERS
    "core:core"
    "framework:framework core"
    "plugins:plugins framework core"
    "store:store core"
    "leader:leader store core"
    "queues:queues framework core"
    "http:http core"
    "sim:sim queues plugins framework core"
    "scheduler:scheduler queues plugins framework store core"
    "inference:inference scheduler queues plugins framework store http core"
    "server:server inference scheduler queues plugins framework store leader http core"
    "cli:cli http core"
    "agent:agent http core")

function(hf_check_layers src)
  set(problems "")
  foreach(entry ${HF_LAYERS})
    string(REPLACE ":" ";" parts "${entry}")
    list(GET parts 0 folder)
    list(GET parts 1 allowed)
    string(REPLACE " " ";" allowed "${allowed}")
    file(GLOB_RECURSE files "${src}/${folder}/*.h" "${src}/${folder}/*.cc")
    foreach(f ${files})
      file(STRINGS "${f}" lines REGEX "^#include \"[a-z_]+/")
      foreach(line ${lines})
        string(REGEX REPLACE "^#include \"([a-z_]+)/.*" "\\1" dep "${line}")
        list(FIND allowed "${dep}" at)
        if(at EQUAL -1)
          file(RELATIVE_PATH rel "${src}" "${f}")
          string(APPEND problems "\n  src/${rel}: ${line} (${folder}/ may include only: ${allowed})")
        endif()
      endforeach()
    endforeach()
  endforeach()
  # Every folder of src/ must have a row, so that a new one is placed on purpose.
  file(GLOB children LIST_DIRECTORIES true "${src}/*")
  foreach(child ${children})
    if(IS_DIRECTORY "${child}")
      get_filename_component(name "${child}" NAME)
      set(found OFF)
      foreach(entry ${HF_LAYERS})
        if(entry MATCHES "^${name}:")
          set(found ON)
        endif()
      endforeach()
      if(NOT found)
        string(APPEND problems "\n  src/${name}/ has no row in HF_LAYERS (cmake/layers.cmake)")
      endif()
    endif()
  endforeach()
  if(problems)
    message(FATAL_ERROR "upward or unlisted includes break the layering of src/:${problems}")
  endif()
endfunction()

if(CMAKE_SCRIPT_MODE_FILE AND HF_SRC)
  hf_check_layers("${HF_SRC}")
endif()
