/* The C API from C: this file is compiled as C11 with -Wall -Wextra -Werror -pedantic, so
 * kiln/kiln.h must be valid C, and it runs an artifact through the C API only.
 *
 *   c_api_c_check ARTIFACT [DIMS[=VALUE]]...
 *
 * One DIMS argument per model input, in input order: "1x576", or "" for a scalar; each input is
 * filled with VALUE, or without one with a fixed pattern in [-1, 1). The program prints the
 * declaration, runs once into context-owned views and once into its own buffers, checks that
 * both agree byte for byte, that the stats count two hits, and that a wrong input count is
 * INVALID_ARGUMENT with a message, then prints each output. Exit 0 when all holds, 1 otherwise.
 * The ctest c_api_c_check runs it on Silero VAD. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/kiln.h"

static int fail(const char* what, kiln_status st, const char* message) {
  fprintf(stderr, "FAIL: %s: %s: %s\n", what, kiln_status_name(st), message);
  return 1;
}

static size_t dtype_size(int32_t dtype) {
  switch (dtype) {
    case KILN_DTYPE_FLOAT32: case KILN_DTYPE_INT32: return 4;
    case KILN_DTYPE_INT64: case KILN_DTYPE_FLOAT64: return 8;
    default: return 0;
  }
}

static size_t num_elements(const kiln_tensor* t) {
  size_t n = 1;
  int32_t d;
  for (d = 0; d < t->rank; ++d) n *= (size_t)t->dims[d];
  return n;
}

/* Parses "AxBxC[=V]" into t's dims and allocates t's data filled with V or the pattern. */
static int make_input(const char* arg, int32_t dtype, kiln_tensor* t) {
  const char* eq = strchr(arg, '=');
  const char* end = eq ? eq : arg + strlen(arg);
  const char* p = arg;
  size_t i, n;
  t->data = NULL;
  t->dtype = dtype;
  t->memory = KILN_MEMORY_HOST;
  t->rank = 0;
  while (p < end) {
    char* e;
    if (t->rank == KILN_MAX_RANK) return 0;
    t->dims[t->rank++] = strtoll(p, &e, 10);
    if (e == p || (e < end && *e != 'x')) return 0;
    p = e < end ? e + 1 : e;
  }
  n = num_elements(t);
  if (dtype_size(dtype) == 0) return 0;
  t->data = malloc(n * dtype_size(dtype) + 1);
  if (t->data == NULL) return 0;
  for (i = 0; i < n; ++i) {
    double v = eq ? atof(eq + 1) : (double)((i * 7919u) % 2000u) / 1000.0 - 1.0;
    switch (dtype) {
      case KILN_DTYPE_FLOAT32: ((float*)t->data)[i] = (float)v; break;
      case KILN_DTYPE_FLOAT64: ((double*)t->data)[i] = v; break;
      case KILN_DTYPE_INT32: ((int32_t*)t->data)[i] = (int32_t)v; break;
      default: ((int64_t*)t->data)[i] = (int64_t)v; break;
    }
  }
  return 1;
}

static void print_info(const char* kind, size_t i, const kiln_tensor_info* info) {
  int32_t d;
  printf("%s %u '%s' dtype %d [", kind, (unsigned)i, info->name, (int)info->dtype);
  for (d = 0; d < info->rank; ++d) {
    if (d) printf(", ");
    if (info->dim_symbols[d]) printf("%s", info->dim_symbols[d]);
    else printf("%lld", (long long)info->dims[d]);
  }
  printf("]\n");
}

int main(int argc, char** argv) {
  kiln_model* model = NULL;
  kiln_context* ctx = NULL;
  kiln_context_options options;
  kiln_tensor inputs[16] = {{0}}, views[16], into[16] = {{0}};
  kiln_stats stats;
  kiln_version_info version;
  size_t num_inputs = 0, num_outputs = 0, i;
  kiln_status st;
  int ok = 1;

  if (argc < 2) {
    fprintf(stderr, "usage: %s ARTIFACT [DIMS[=VALUE]]...\n", argv[0]);
    return 2;
  }
  if (kiln_version(&version) != KILN_STATUS_OK) return fail("kiln_version", KILN_STATUS_INTERNAL, "");
  printf("kiln %u.%u.%u, artifact formats %u..%u\n", (unsigned)version.major, (unsigned)version.minor,
         (unsigned)version.patch, (unsigned)version.min_format_version, (unsigned)version.max_format_version);

  st = kiln_model_load_file(argv[1], NULL, &model);
  if (st != KILN_STATUS_OK) {
    ok = !fail("kiln_model_load_file", st, kiln_model_last_error(model));
    kiln_model_destroy(model);
    return !ok;
  }
  if (kiln_model_num_inputs(model, &num_inputs) != KILN_STATUS_OK ||
      kiln_model_num_outputs(model, &num_outputs) != KILN_STATUS_OK || num_inputs > 16 || num_outputs > 16 ||
      (size_t)(argc - 2) != num_inputs) {
    fprintf(stderr, "FAIL: the model has %u inputs and %u outputs, %d DIMS given\n", (unsigned)num_inputs,
            (unsigned)num_outputs, argc - 2);
    kiln_model_destroy(model);
    return 1;
  }
  for (i = 0; i < num_inputs && ok; ++i) {
    kiln_tensor_info info;
    ok = kiln_model_input(model, i, &info) == KILN_STATUS_OK;
    if (ok) print_info("input", i, &info);
    if (ok && !make_input(argv[2 + i], info.dtype, &inputs[i])) {
      fprintf(stderr, "FAIL: input %u: cannot make dtype %d from '%s'\n", (unsigned)i, (int)info.dtype,
              argv[2 + i]);
      ok = 0;
    }
  }
  for (i = 0; i < num_outputs && ok; ++i) {
    kiln_tensor_info info;
    ok = kiln_model_output(model, i, &info) == KILN_STATUS_OK;
    if (ok) print_info("output", i, &info);
  }

  if (ok) {
    kiln_context_options_init(&options);
    options.device = KILN_DEVICE_CPU;
    options.cpu_threads = 1;
    st = kiln_context_create(model, &options, &ctx);
    if (st != KILN_STATUS_OK) ok = !fail("kiln_context_create", st, kiln_context_last_error(ctx));
  }
  kiln_model_destroy(model); /* the context keeps what it needs */
  if (ok) {
    st = kiln_context_run(ctx, inputs, num_inputs, views, num_outputs, NULL);
    if (st != KILN_STATUS_OK) ok = !fail("kiln_context_run", st, kiln_context_last_error(ctx));
  }
  for (i = 0; i < num_outputs && ok; ++i) {
    const size_t bytes = num_elements(&views[i]) * dtype_size(views[i].dtype);
    into[i] = views[i];
    into[i].data = malloc(bytes + 1);
    ok = into[i].data != NULL && dtype_size(views[i].dtype) != 0;
    if (ok) memcpy(into[i].data, views[i].data, bytes); /* the views change with the next run */
  }
  if (ok) {
    kiln_tensor* copies = into;
    st = kiln_context_run_into(ctx, inputs, num_inputs, copies, num_outputs, NULL);
    if (st != KILN_STATUS_OK) ok = !fail("kiln_context_run_into", st, kiln_context_last_error(ctx));
  }
  for (i = 0; i < num_outputs && ok; ++i) {
    const size_t n = num_elements(&into[i]), bytes = n * dtype_size(into[i].dtype);
    size_t k;
    double sum = 0;
    if (memcmp(into[i].data, views[i].data, bytes) != 0) {
      fprintf(stderr, "FAIL: output %u differs between kiln_context_run and kiln_context_run_into\n", (unsigned)i);
      ok = 0;
    }
    for (k = 0; k < n; ++k)
      sum += into[i].dtype == KILN_DTYPE_FLOAT32 ? ((const float*)into[i].data)[k] : 0.0;
    printf("output %u: %u elements, first %.9g, sum %.9g\n", (unsigned)i, (unsigned)n,
           into[i].dtype == KILN_DTYPE_FLOAT32 && n ? ((const float*)into[i].data)[0] : 0.0, sum);
  }
  if (ok) {
    st = kiln_context_run(ctx, inputs, num_inputs - 1, views, num_outputs, NULL);
    if (st != KILN_STATUS_INVALID_ARGUMENT || strstr(kiln_context_last_error(ctx), "num_inputs is") == NULL)
      ok = !fail("a short input list", st, kiln_context_last_error(ctx));
  }
  if (ok) {
    ok = kiln_context_stats(ctx, &stats) == KILN_STATUS_OK && stats.calls == 2 && stats.cache_hits == 2;
    if (!ok) fprintf(stderr, "FAIL: stats: %llu calls, %llu hits\n", (unsigned long long)stats.calls,
                     (unsigned long long)stats.cache_hits);
  }
  if (ok) printf("ok: run and run_into agree; stats %llu calls, %llu hits, last host time %lld ns\n",
                 (unsigned long long)stats.calls, (unsigned long long)stats.cache_hits, (long long)stats.last_host_ns);
  kiln_context_destroy(ctx);
  for (i = 0; i < num_inputs; ++i) free(inputs[i].data);
  for (i = 0; i < num_outputs; ++i) free(into[i].data);
  return ok ? 0 : 1;
}
