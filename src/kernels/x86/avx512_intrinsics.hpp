// <immintrin.h> for the files built with AVX-512 flags, with the warnings
// GCC 12 reports from inside its own header silenced for the including file:
// avx512fintrin.h builds its insert, extract and broadcast intrinsics on an
// intentionally undefined vector, which -Wmaybe-uninitialized (and
// -Wuninitialized) flag wherever they are inlined; every value of ours is
// set before use. A diagnostic pragma lasts to the end of the translation
// unit, so this header is included first.
#pragma once
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
