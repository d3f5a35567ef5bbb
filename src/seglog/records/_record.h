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

/* VARINT_OK, VARINT_TOO_LONG, or VARINT_TRUNCATED for a length outside [min, bytes left] */
static inline int
read_len(const uint8_t **pp, const uint8_t *end, int64_t *len, int64_t min)
{
    int rc = varint_read(pp, end, 5, len);
    if (rc != VARINT_OK)
        return rc;
    return (*len < min || *len > end - *pp) ? VARINT_TRUNCATED : VARINT_OK;
}

/* the fault of a length field: a varint that never ends is named as such */
#define LENGTH_FAULT(rc, field) ((rc) == VARINT_TOO_LONG ? "varint too long in the " field : field " out of range")

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
    if ((rc = read_len(&p, rend, &r->key_len, -1)) != VARINT_OK)
        PARSE_FAIL(LENGTH_FAULT(rc, "key length"), p);
    r->key = p;
    p += r->key_len > 0 ? r->key_len : 0;
    if ((rc = read_len(&p, rend, &r->value_len, -1)) != VARINT_OK)
        PARSE_FAIL(LENGTH_FAULT(rc, "value length"), p);
    r->value = p;
    p += r->value_len > 0 ? r->value_len : 0;
    if ((rc = varint_read(&p, rend, 5, &r->header_count)) == VARINT_TOO_LONG)
        PARSE_FAIL("varint too long in the header count", p);
    if (rc != VARINT_OK || r->header_count < 0 || r->header_count > (rend - p) / 2) /* a header: 2 bytes at least */
        PARSE_FAIL("header count out of range", p);
    r->headers = p;
    for (int64_t h = 0; h < r->header_count; h++) {
        int64_t klen, vlen;
        if ((rc = read_len(&p, rend, &klen, 0)) != VARINT_OK) /* a header key is never null */
            PARSE_FAIL(LENGTH_FAULT(rc, "header key length"), p);
        p += klen;
        if ((rc = read_len(&p, rend, &vlen, -1)) != VARINT_OK)
            PARSE_FAIL(LENGTH_FAULT(rc, "header value length"), p);
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
