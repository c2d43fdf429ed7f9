/* What a unit test runs under, for the tests that count allocations or hand
 * the kernel memory it cannot read: valgrind (RUNNING_ON_VALGRIND, 0 where
 * its header is missing) and AddressSanitizer (GDU_TEST_ASAN, gcc's or
 * clang's), whose allocators and interceptors are not the test's own. */
#ifndef GDUNLOCK_TESTS_TEST_RUNTIME_H
#define GDUNLOCK_TESTS_TEST_RUNTIME_H

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif

#if defined(__SANITIZE_ADDRESS__)
#define GDU_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GDU_TEST_ASAN 1
#endif
#endif
#ifndef GDU_TEST_ASAN
#define GDU_TEST_ASAN 0
#endif

#endif
