/* The checks of the C tests (compiled as C against sandlet.h): CHECK counts a condition as passed or
   failed (printing the failed ones), OK checks that a sandlet call returned no error (printing its
   message if it did). Each test prints "N passed, N failed" at its end. */
#ifndef SANDLET_TEST_C_CHECK_H
#define SANDLET_TEST_C_CHECK_H
#include <stdio.h>

#include "sandlet/sandlet.h"

extern int passed, failed; /* defined once by each test program (capi_test.c counts for all its files) */
#define CHECK(cond)                                                              \
  do {                                                                           \
    if (cond) {                                                                  \
      ++passed;                                                                  \
    } else {                                                                     \
      ++failed;                                                                  \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);   \
    }                                                                            \
  } while (0)
#define OK(call)                                                                                      \
  do {                                                                                                \
    sandlet_error_t *e_ = (call);                                                                     \
    if (e_) fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, sandlet_error_message(e_)); \
    CHECK(e_ == NULL);                                                                                \
    sandlet_error_delete(e_);                                                                         \
  } while (0)

/* A sandbox on the test root filesystem alone, or NULL (the failure counted and printed). */
static inline sandlet_sandbox_t *create_rootfs_sandbox(sandlet_runtime_t *rt) {
  sandlet_spec_t *spec = NULL;
  sandlet_sandbox_t *sb = NULL;
  OK(sandlet_spec_new(&spec));
  OK(sandlet_spec_add_layer(spec, SANDLET_TEST_ROOTFS));
  OK(sandlet_sandbox_create(rt, spec, &sb));
  sandlet_spec_delete(spec);
  return sb;
}

/* The tests of other files, run by capi_test.c's main. */
void test_copy(const char *root);
void test_session(const char *root);

#endif
