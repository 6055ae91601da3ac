/* gpufaas — the system shared memory extension's endpoints (gateway/http):
 *
 *   GET  /v2/systemsharedmemory[/region/{r}]/status
 *   POST /v2/systemsharedmemory/region/{r}/register   {"key", "offset", "byte_size"}
 *   POST /v2/systemsharedmemory[/region/{r}]/unregister
 *
 * The regions themselves are shm.c's; the inference codec reads inputs from
 * and writes outputs to them. CUDA shared memory is answered 400: it needs a
 * GPU to test, and gpufaas's CI has none.
 */
#include <string.h>

#include "gateway/http/http_impl.h"

static const char *region_of(gf_http_req *r)
{
    return strstr(r->route->pattern, "{r}") != NULL ? r->region : NULL;
}

void gf_http_shm_status(gf_http_req *r)
{
    gf_buf b;
    gf_buf_init(&b);
    gf_err err;
    gf_status st = gf_shm_status_json(r->srv->shm, region_of(r), &b, &err);
    if (st == GF_OK) {
        gf_http_reply_json(r, 200, &b);
        return;
    }
    gf_buf_deinit(&b);
    gf_http_fail(r, st, "%s", gf_err_msg(&err));
}

/* A member of body that is a non-negative integer (0 when absent and
 * optional). False (answered) when bad. */
static bool get_u64(gf_http_req *r, const gf_json *body, const char *key, bool required,
                    uint64_t *out)
{
    const gf_json *v = gf_json_get(body, key);
    *out = 0;
    if (v == NULL && !required)
        return true;
    if (v == NULL || v->type != GF_JSON_NUMBER || !v->u.num.is_uint) {
        gf_http_fail(r, GF_ERR_INVALID, "register: \"%s\" must be a non-negative integer%s", key,
                     v == NULL ? " (it is missing)" : "");
        return false;
    }
    *out = v->u.num.u;
    return true;
}

void gf_http_shm_register(gf_http_req *r)
{
    gf_json_doc *doc;
    const gf_json *body;
    if (!gf_http_small_json_body(r, &doc, &body))
        return;
    if (body == NULL) {
        gf_http_fail(r, GF_ERR_INVALID, "register needs {\"key\", \"offset\", \"byte_size\"}");
        return;
    }
    const gf_json *key = gf_json_get(body, "key");
    uint64_t offset, size;
    bool ok = true;
    if (key == NULL || key->type != GF_JSON_STRING || key->u.str.len == 0 ||
        strlen(key->u.str.s) != key->u.str.len) {
        gf_http_fail(r, GF_ERR_INVALID, "register: \"key\" must name the shared memory object "
                     "(\"/my_region\")");
        ok = false;
    }
    ok = ok && get_u64(r, body, "offset", false, &offset) &&
         get_u64(r, body, "byte_size", true, &size);
    gf_err err;
    gf_status st = ok ? gf_shm_register(r->srv->shm, r->region, key->u.str.s, offset, size, &err)
                      : GF_OK;
    gf_json_doc_free(doc);
    if (!ok)
        return;
    if (st != GF_OK)
        gf_http_fail(r, st, "%s", gf_err_msg(&err));
    else
        gf_http_reply(r, 200, NULL);
}

void gf_http_shm_unregister(gf_http_req *r)
{
    gf_err err;
    gf_status st = gf_shm_unregister(r->srv->shm, region_of(r), &err);
    if (st != GF_OK)
        gf_http_fail(r, st, "%s", gf_err_msg(&err));
    else
        gf_http_reply(r, 200, NULL);
}

void gf_http_cuda_shm(gf_http_req *r)
{
    gf_http_fail(r, GF_ERR_UNSUPPORTED,
                 "CUDA shared memory is not supported by gpufaas (use system shared memory: "
                 "/v2/systemsharedmemory)");
}
