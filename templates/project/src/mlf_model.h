/* The model table the firmware's console protocol works from. One mlf_model_t per MLF module;
 * each is defined by the lowering of that module's executor (src/model_<name>.c). */
#ifndef MLF_MODEL_H_
#define MLF_MODEL_H_

#include <stdint.h>

typedef struct {
  const char* name;
  void* data;           /* where the host's input bytes go, or an output is read from */
  uint32_t nbytes;
  uint8_t dtype_code;   /* DLPack type code: 0 int, 1 uint, 2 float */
  uint8_t dtype_bits;
  uint8_t ndim;
  const int32_t* shape;
} mlf_tensor_t;

typedef struct {
  const char* name;
  int32_t (*run)(void);  /* 0 on success, as tvmgen_<mod>_run */
  const mlf_tensor_t* inputs;
  uint32_t num_inputs;
  const mlf_tensor_t* outputs;
  uint32_t num_outputs;
} mlf_model_t;

extern const mlf_model_t* const mlf_models[];
extern const uint32_t mlf_num_models;

/* Empties the pool behind TVMBackendAllocWorkspace (sized at build time from the MLF memory
 * summary) before a run; does nothing when no module allocates at run time. */
void mlf_workspace_reset(void);

/* The runtime's message for the last failed run ("" or NULL when it has none to give). */
const char* mlf_last_error(void);

#endif /* MLF_MODEL_H_ */
