# The python backend (backends/python_*.c) against real adapters installed
# by pip into the test environment (scripts/python-env.sh): the contract
# suite on the example backend plus the boundary cases, and a fleet on the
# embedded log with its bridge killed mid-run. Label "python", with the
# package's own tests; included from tests/CMakeLists.txt.
add_executable(test_backend_python ${CMAKE_CURRENT_LIST_DIR}/test_backend_python.c)
target_link_libraries(test_backend_python PRIVATE altar_testutil)
add_test(NAME python.backend_contract
         COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/with-venv.sh $<TARGET_FILE:test_backend_python>)
set_tests_properties(python.backend_contract PROPERTIES LABELS python TIMEOUT 900 ENVIRONMENT "${ALTAR_PY_ENV}")
add_test(NAME python.backend_fleet
         COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/with-venv.sh sh ${CMAKE_CURRENT_LIST_DIR}/test_fleet_python.sh)
set_tests_properties(python.backend_fleet PROPERTIES LABELS python TIMEOUT 900 RUN_SERIAL TRUE
                     ENVIRONMENT "${ALTAR_PY_ENV}")
# Python storage adapters (backends/python_storage.c): the Storage contract
# on the example adapter (examples/python_storage) through the bridge, and
# adapters that raise, hang, block, write garbage, lie about types or die.
add_executable(test_storage_python ${CMAKE_CURRENT_LIST_DIR}/test_storage_python.c)
target_link_libraries(test_storage_python PRIVATE altar_testutil)
add_test(NAME python.storage_contract
         COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/with-venv.sh $<TARGET_FILE:test_storage_python>)
set_tests_properties(python.storage_contract PROPERTIES LABELS python TIMEOUT 900 ENVIRONMENT "${ALTAR_PY_ENV}")
add_test(NAME python.storage_fleet
         COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/with-venv.sh sh ${CMAKE_CURRENT_LIST_DIR}/test_fleet_pystorage.sh)
set_tests_properties(python.storage_fleet PROPERTIES LABELS python TIMEOUT 900 RUN_SERIAL TRUE
                     ENVIRONMENT "${ALTAR_PY_ENV}")
