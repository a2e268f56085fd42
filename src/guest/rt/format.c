#include "format.h"

#include <stdint.h>

/* Output sink: writes while there is room, counts everything. */
typedef struct {
  char *buf;
  size_t size;
  size_t len;
} Sink;

static void put(Sink *s, char c) {
  if (s->len + 1 < s->size) s->buf[s->len] = c;
  s->len++;
}

static void put_repeat(Sink *s, char c, int n) {
  while (n-- > 0) put(s, c);
}

static void put_padded(Sink *s, const char *text, int len, int width, int left) {
  if (!left) put_repeat(s, ' ', width - len);
  for (int i = 0; i < len; i++) put(s, text[i]);
  if (left) put_repeat(s, ' ', width - len);
}

typedef struct {
  int left, zero, plus, space, alt;
  int width;
  int precision; /* -1: none */
} Spec;

static void put_number(Sink *s, const Spec *sp, uintmax_t value, int negative, unsigned base, int upper) {
  char digits[32];
  int n = 0;
  const char *set = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  while (value) {
    digits[n++] = set[value % base];
    value /= base;
  }
  /* Precision is the minimum digit count; "%.0d" of zero prints nothing, as in C. */
  int min_digits = sp->precision >= 0 ? sp->precision : 1;
  int zeros = min_digits > n ? min_digits - n : 0;
  char prefix[3];
  int plen = 0;
  if (negative)
    prefix[plen++] = '-';
  else if (sp->plus)
    prefix[plen++] = '+';
  else if (sp->space)
    prefix[plen++] = ' ';
  if (sp->alt && base == 16 && n > 0) {
    prefix[plen++] = '0';
    prefix[plen++] = upper ? 'X' : 'x';
  } else if (sp->alt && base == 8 && zeros == 0) {
    zeros = 1;
  }
  int body = plen + zeros + n;
  int pad = sp->width > body ? sp->width - body : 0;
  if (!sp->left && !(sp->zero && sp->precision < 0)) put_repeat(s, ' ', pad);
  for (int i = 0; i < plen; i++) put(s, prefix[i]);
  if (!sp->left && sp->zero && sp->precision < 0) put_repeat(s, '0', pad);
  put_repeat(s, '0', zeros);
  while (n > 0) put(s, digits[--n]);
  if (sp->left) put_repeat(s, ' ', pad);
}

int sandlet_rt_vformat(char *buf, size_t size, const char *fmt, va_list ap_in) {
  Sink s = {buf, size, 0};
  va_list ap;
  va_copy(ap, ap_in);
  for (const char *p = fmt; *p; p++) {
    if (*p != '%') {
      put(&s, *p);
      continue;
    }
    Spec sp = {0, 0, 0, 0, 0, 0, -1};
    for (;; p++) {
      char f = p[1];
      if (f == '-') sp.left = 1;
      else if (f == '0') sp.zero = 1;
      else if (f == '+') sp.plus = 1;
      else if (f == ' ') sp.space = 1;
      else if (f == '#') sp.alt = 1;
      else break;
    }
    p++;
    if (*p == '*') {
      sp.width = va_arg(ap, int);
      if (sp.width < 0) {
        sp.left = 1;
        sp.width = -sp.width;
      }
      p++;
    } else {
      while (*p >= '0' && *p <= '9') sp.width = sp.width * 10 + (*p++ - '0');
    }
    if (*p == '.') {
      p++;
      sp.precision = 0;
      if (*p == '*') {
        sp.precision = va_arg(ap, int);
        if (sp.precision < 0) sp.precision = -1;
        p++;
      } else {
        while (*p >= '0' && *p <= '9') sp.precision = sp.precision * 10 + (*p++ - '0');
      }
    }
    int length = 0; /* -2 hh, -1 h, 0 int, 1 long, 2 long long (and z j t) */
    for (;; p++) {
      if (*p == 'h') length = length == -1 ? -2 : -1;
      else if (*p == 'l') length = length == 1 ? 2 : 1;
      else if (*p == 'z' || *p == 'j' || *p == 't') length = 2;
      else break;
    }
    switch (*p) {
      case 'd':
      case 'i': {
        intmax_t v;
        if (length >= 2) v = va_arg(ap, long long);
        else if (length == 1) v = va_arg(ap, long);
        else v = va_arg(ap, int);
        if (length == -1) v = (short)v;
        if (length == -2) v = (signed char)v;
        uintmax_t mag = v < 0 ? (uintmax_t)0 - (uintmax_t)v : (uintmax_t)v;
        put_number(&s, &sp, mag, v < 0, 10, 0);
        break;
      }
      case 'u':
      case 'x':
      case 'X':
      case 'o': {
        uintmax_t v;
        if (length >= 2) v = va_arg(ap, unsigned long long);
        else if (length == 1) v = va_arg(ap, unsigned long);
        else v = va_arg(ap, unsigned);
        if (length == -1) v = (unsigned short)v;
        if (length == -2) v = (unsigned char)v;
        sp.plus = sp.space = 0;
        unsigned base = *p == 'o' ? 8 : *p == 'u' ? 10 : 16;
        put_number(&s, &sp, v, 0, base, *p == 'X');
        break;
      }
      case 'p': {
        void *v = va_arg(ap, void *);
        sp.alt = 1;
        put_number(&s, &sp, (uintptr_t)v, 0, 16, 0);
        break;
      }
      case 'c': {
        char c = (char)va_arg(ap, int);
        put_padded(&s, &c, 1, sp.width, sp.left);
        break;
      }
      case 's': {
        const char *str = va_arg(ap, const char *);
        if (!str) str = "(null)";
        int len = 0;
        while (str[len] && (sp.precision < 0 || len < sp.precision)) len++;
        put_padded(&s, str, len, sp.width, sp.left);
        break;
      }
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G':
      case 'a':
      case 'A':
        (void)va_arg(ap, double);
        put_padded(&s, "?", 1, sp.width, sp.left);
        break;
      case '%':
        put(&s, '%');
        break;
      case '\0':
        p--; /* a lone '%' at the end: print it, then stop */
        put(&s, '%');
        break;
      default: /* unknown conversion: print it as written */
        put(&s, '%');
        put(&s, *p);
        break;
    }
  }
  va_end(ap);
  if (size > 0) buf[s.len < size ? s.len : size - 1] = '\0';
  return s.len > 0x7fffffff ? 0x7fffffff : (int)s.len;
}
