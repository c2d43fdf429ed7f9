# The Markdown files' relative links and anchors resolve, and the README
# stays a front door (check_doc_links.py). Once: nothing in it is compiled.
find_program(GDU_DOCS_PYTHON python3)
if(GDU_DOCS_PYTHON AND NOT GDUNLOCK_SANITIZE)
  add_test(NAME test_doc_links COMMAND ${GDU_DOCS_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/check_doc_links.py
                                       ${CMAKE_SOURCE_DIR})
  set_tests_properties(test_doc_links PROPERTIES LABELS unit)
endif()
