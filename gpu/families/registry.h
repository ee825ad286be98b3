/* The family registry: one row a family, (file symbol, enum name). A row's place is its value
 * of gpu_model_family_t (gpu/model/model.h generates the enum from this list) and its index in
 * the table of rows (families.c); the family's file defines the row itself
 * (const gpu_family_t gpu_family_<symbol>). Only macros here, so the loader in gpu/model can
 * number the families without including a family. */
#ifndef RECLASS_GPU_FAMILIES_REGISTRY_H
#define RECLASS_GPU_FAMILIES_REGISTRY_H

#define GPU_FAMILIES(X)                                                                            \
    X(bert, BERT)                                                                                  \
    X(distilbert, DISTILBERT)                                                                      \
    X(roberta, ROBERTA)                                                                            \
    X(xlm_roberta, XLM_ROBERTA)                                                                    \
    X(electra, ELECTRA)                                                                            \
    X(modernbert, MODERNBERT)                                                                      \
    X(deberta, DEBERTA_V2)                                                                         \
    /* a new family: one line above this one */

#endif
