/* gpufaas — the built-in function kinds (functions/kinds). Each is written
 * against gpufaas/function.h exactly as a plugin would be; this header only
 * lets functions/runtime.c list them. */
#ifndef GF_FUNCTIONS_KINDS_H
#define GF_FUNCTIONS_KINDS_H

#include <gpufaas/function.h>

const gf_fn_desc *gf_fn_kind_mlp(void);
const gf_fn_desc *gf_fn_kind_resnet(void);
const gf_fn_desc *gf_fn_kind_bert(void);
const gf_fn_desc *gf_fn_kind_onnx(void);

#endif /* GF_FUNCTIONS_KINDS_H */
