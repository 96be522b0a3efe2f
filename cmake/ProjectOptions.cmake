# Compile options for project code: an INTERFACE target every project target
# links, so third-party and generated code keep their own warnings.
add_library(zeroshard_options INTERFACE)
target_compile_options(zeroshard_options INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${ZEROSHARD_WERROR}>>:-Werror>)
if(ZEROSHARD_SANITIZE)
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined>
                      $<$<COMPILE_LANGUAGE:CXX>:-fno-omit-frame-pointer>
                      $<$<COMPILE_LANGUAGE:CXX>:-fno-sanitize-recover=undefined>)
  add_link_options(-fsanitize=address,undefined)
endif()

# zeroshard_add_test(NAME src... LIBS libs... [LABELS l...] [TIMEOUT s])
# One GoogleTest binary registered with CTest; a test that needs a tool or a GPU
# exits 77 (GTEST_SKIP in main) and CTest reports it skipped.
# The multi-process and streaming tests that `scripts/test.sh stress` runs
# 20 times each under CPU load (label "stress"): each takes seconds, and
# together they start coordinators, workers, streams and waits of every kind.
set(ZEROSHARD_STRESS_TESTS
  coordinator_heartbeat_stream_test coordinator_kv_wait_load_test
  coordinator_loopback_generation_test coordinator_process_test coordinator_store_test
  security_impersonation_test security_least_privilege_test elastic_live_test
  checkpoint_resume_test checkpoint_process_test)

function(zeroshard_add_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  if(name IN_LIST ZEROSHARD_STRESS_TESTS)
    list(APPEND T_LABELS stress)
  endif()
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest_main GTest::gmock zeroshard_options)
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT} SKIP_RETURN_CODE 77
    LABELS "${T_LABELS}"
    ENVIRONMENT "ZEROSHARD_BIN_DIR=${PROJECT_BINARY_DIR}/bin;ZEROSHARD_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
endfunction()

# A Python test: SCRIPT (beside the calling CMakeLists.txt) run by python3,
# with the built binaries' folder in ZEROSHARD_BIN_DIR; exit 77 is a skip
# (a test tool such as torch missing), as the C++ tests' GTEST_SKIP. No
# python3: no test.
function(zeroshard_add_python_test name)
  cmake_parse_arguments(T "" "SCRIPT;TIMEOUT" "LABELS" ${ARGN})
  find_program(ZEROSHARD_PYTHON3_FOR_TESTS python3)
  if(NOT ZEROSHARD_PYTHON3_FOR_TESTS)
    return()
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  add_test(NAME ${name}
           COMMAND ${ZEROSHARD_PYTHON3_FOR_TESTS} ${CMAKE_CURRENT_SOURCE_DIR}/${T_SCRIPT})
  set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT} SKIP_RETURN_CODE 77
    LABELS "${T_LABELS}"
    ENVIRONMENT "ZEROSHARD_BIN_DIR=${PROJECT_BINARY_DIR}/bin;PYTHONDONTWRITEBYTECODE=1")
endfunction()

# Add every direct subfolder of the current folder that has a CMakeLists.txt,
# so areas can be added without editing a shared list.
macro(zeroshard_add_subfolders)
  file(GLOB _zs_children LIST_DIRECTORIES true RELATIVE ${CMAKE_CURRENT_SOURCE_DIR}
       ${CMAKE_CURRENT_SOURCE_DIR}/*)
  list(SORT _zs_children)
  foreach(_zs_child ${_zs_children})
    if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/${_zs_child}/CMakeLists.txt)
      add_subdirectory(${_zs_child})
    endif()
  endforeach()
endmacro()

set(CMAKE_RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)
