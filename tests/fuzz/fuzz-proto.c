/*
 * fuzz-proto: libFuzzer target for the frame decoder and the JSON frame
 * parser, the code that takes the hostile guest's bytes on the host.  The
 * input's first byte seeds the sizes of the chunks it is fed in; after a
 * protocol error the decoder starts over on the rest, as the guest daemon
 * does.  Build and run:
 *
 *	clang -g -O1 -fsanitize=fuzzer,address,undefined -std=c11 \
 *	    -D_GNU_SOURCE -Ilib -o build/fuzz-proto tests/fuzz/fuzz-proto.c \
 *	    lib/sp_proto.c lib/sp_err.c lib/sp_io.c -ljansson
 *	build/fuzz-proto -max_total_time=60 -max_len=70000
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sp.h"

#define BOUND	((size_t)SP_FRAME_HDR + SP_FRAME_MAX + SP_FRAME_CHUNK)

static uint32_t
next_rand(uint32_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

static void
take_frames(struct sp_frame_dec *d)
{
	struct sp_frame f;
	struct sp_err e;
	json_t *j;
	unsigned int sum = 0;
	uint32_t i;
	int r;

	while ((r = sp_frame_dec_next(d, &f, &e)) == 1) {
		if (f.type == 0 || f.type > SP_FR__MAX || f.len > SP_FRAME_MAX)
			abort();
		/* Every byte of the payload must be readable. */
		for (i = 0; i < f.len; i++)
			sum += f.data[i];
		if (f.type == SP_FR_HELLO || f.type == SP_FR_REQ ||
		    f.type == SP_FR_EXIT || f.type == SP_FR_ERROR) {
			if (f.len > SP_JSON_MAX)
				abort();
			if (sp_frame_json(&f, &j, &e) == 0) {
				if (!json_is_object(j))
					abort();
				json_decref(j);
			} else if (e.code != SP_E_PROTOCOL)
				abort();
		}
	}
	if (d->cap > BOUND || d->len - d->off > BOUND)
		abort();
	if (r == -1) {
		sp_frame_dec_release(d);
		sp_frame_dec_init(d);
	}
	(void)sum;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sp_frame_dec d;
	struct sp_err e;
	uint32_t seed;
	size_t n;

	if (size < 1)
		return 0;
	seed = 0x9e3779b9u ^ data[0];
	data++;
	size--;
	sp_frame_dec_init(&d);
	while (size > 0) {
		n = next_rand(&seed) % 8 == 0 ? SP_FRAME_CHUNK :
		    1 + next_rand(&seed) % 64;
		if (n > size)
			n = size;
		if (sp_frame_dec_feed(&d, data, n, &e) == -1) {
			sp_frame_dec_release(&d);
			sp_frame_dec_init(&d);
		}
		take_frames(&d);
		data += n;
		size -= n;
	}
	sp_frame_dec_release(&d);
	return 0;
}
