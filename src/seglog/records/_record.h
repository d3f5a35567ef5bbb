/* One parser for a v2 record (Kafka's DefaultRecord), shared by the decoder,
 * the append validator and the Arrow column builder. It only finds the
 * fields: every length is checked against the bytes present, so callers can
 * trust the pointers it returns. */
#ifndef SEGLOG_RECORD_H
#define SEGLOG_RECORD_H

#include "_varint.h"

typedef struct {
    int64_t ts_delta, off_delta;
    const uint8_t *key, *value, *headers;
    int64_t key_len, value_len, header_count; /* -1: null */
    const uint8_t *end;                       /* first byte after the record */
} RawRecord;

typedef struct {
    const char *fault; /* NULL when the record parsed */
    const uint8_t *at; /* where the fault was found */
} ParseResult;

#define PARSE_FAIL(what, where) \
    do {                        \
        res.fault = (what);     \
        res.at = (where);       \
        return res;             \
    } while (0)

static inline int
read_len(const uint8_t **pp, const uint8_t *end, int64_t *len, int64_t min)
{
    if (varint_read(pp, end, 5, len) != VARINT_OK)
        return -1;
    return (*len < min || *len > end - *pp) ? -1 : 0;
}

/* Parses one record at *pp (advancing it past the record). */
static inline ParseResult
parse_record(const uint8_t **pp, const uint8_t *end, RawRecord *r)
{
    ParseResult res = {NULL, NULL};
    const uint8_t *p = *pp, *start = *pp;
    int64_t length;
    int rc = varint_read(&p, end, 5, &length);
    if (rc == VARINT_TOO_LONG)
        PARSE_FAIL("varint too long in the record length", start);
    if (rc != VARINT_OK || length < 6 || length > end - p)
        PARSE_FAIL("record length out of range (truncated record)", start);
    const uint8_t *rend = p + length;
    p += 1; /* attributes: unused */
    rc = varint_read(&p, rend, 10, &r->ts_delta);
    if (rc != VARINT_OK)
        PARSE_FAIL(rc == VARINT_TOO_LONG ? "varint too long in the timestamp delta" : "truncated timestamp delta", p);
    rc = varint_read(&p, rend, 5, &r->off_delta);
    if (rc != VARINT_OK)
        PARSE_FAIL(rc == VARINT_TOO_LONG ? "varint too long in the offset delta" : "truncated offset delta", p);
    if (read_len(&p, rend, &r->key_len, -1) < 0)
        PARSE_FAIL("key length out of range", p);
    r->key = p;
    p += r->key_len > 0 ? r->key_len : 0;
    if (read_len(&p, rend, &r->value_len, -1) < 0)
        PARSE_FAIL("value length out of range", p);
    r->value = p;
    p += r->value_len > 0 ? r->value_len : 0;
    if (varint_read(&p, rend, 5, &r->header_count) != VARINT_OK || r->header_count < 0 ||
        r->header_count > (rend - p) / 2) /* a header takes at least two bytes */
        PARSE_FAIL("header count out of range", p);
    r->headers = p;
    for (int64_t h = 0; h < r->header_count; h++) {
        int64_t klen, vlen;
        if (read_len(&p, rend, &klen, 0) < 0) /* a header key is never null */
            PARSE_FAIL("header key length out of range", p);
        p += klen;
        if (read_len(&p, rend, &vlen, -1) < 0)
            PARSE_FAIL("header value length out of range", p);
        p += vlen > 0 ? vlen : 0;
    }
    if (p != rend)
        PARSE_FAIL("bytes left over inside the record", p);
    r->end = rend;
    *pp = rend;
    return res;
}

/* Steps over one header of a record parse_record accepted. */
static inline void
next_header(const uint8_t **pp, const uint8_t **key, int64_t *klen, const uint8_t **value, int64_t *vlen)
{
    const uint8_t *p = *pp;
    varint_read(&p, p + 5, 5, klen);
    *key = p;
    p += *klen;
    varint_read(&p, p + 5, 5, vlen);
    *value = p;
    p += *vlen > 0 ? *vlen : 0;
    *pp = p;
}

#endif
