/* What the files of gpu/model share and nobody else needs. */
#ifndef RECLASS_GPU_MODEL_INT_H
#define RECLASS_GPU_MODEL_INT_H

#include <stddef.h>

#include "gpu/model/model.h"
#include "gpu/model/safetensors.h"

/* Allocates the layer table and the one weight blob for m->cfg and slices it (model.c).
 * 0 or -1 (out of memory). */
int gpu_model_alloc_weights(gpu_model_t *m);

/* n labels "LABEL_0".. (model_config.c), or NULL when out of memory. */
char **gpu_model_labels_default(int n);

/* config.json at path -> cfg (model_config.c); on failure nothing is left allocated. */
int gpu_model_read_config(const char *path, gpu_model_config_t *cfg, char *err, size_t errlen);

/* The activation of family f's head (tanh, ReLU or GELU). */
gpu_act_t gpu_model_family_head_act(gpu_model_family_t f);

/* Reads every weight of m's family from f into m's blob (model_weights.c). 0, or -1 with
 * err naming the tensor. */
int gpu_model_bind_weights(gpu_model_t *m, const gpu_st_file_t *f, char *err, size_t errlen);

#endif
