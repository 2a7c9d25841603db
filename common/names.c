/*  common/names.c: name grammars (names.h). */
#include "names.h"

#include <stddef.h>

bool ak_name_ok (const char *s)
{
    size_t n = 0;
    for (; s[n]; n++)
        if (!((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= '0' && s[n] <= '9') || s[n] == '_'))
            return false;
    return n > 0 && n < AK_MAX_NAME;
}

bool ak_name_param_ok (const char *s)
{
    if (!(s[0] >= 'A' && s[0] <= 'Z'))
        return false;
    size_t n = 1;
    for (; s[n]; n++)
        if (!((s[n] >= 'A' && s[n] <= 'Z') || (s[n] >= '0' && s[n] <= '9') || s[n] == '_'))
            return false;
    return n < AK_MAX_NAME;
}

bool ak_name_ident_ok (const char *s)
{
    size_t n = 0;
    for (; s[n]; n++) {
        char c = s[n];
        bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
        if (!(alpha || (n > 0 && c >= '0' && c <= '9')))
            return false;
    }
    return n > 0 && n < AK_MAX_NAME;
}

bool ak_name_label_ok (const char *s, bool upper)
{
    size_t n = 0;
    for (; s[n]; n++) {
        char c = s[n];
        bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'
               || (upper && ((c >= 'A' && c <= 'Z') || c == '.'));
        if (!ok)
            return false;
    }
    return n > 0 && n < AK_MAX_NAME;
}

bool ak_name_class_ok (const char *s)
{
    size_t n = 0;
    for (; s[n]; n++) {
        char c = s[n];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
               || c == '_' || c == '-' || c == '.' || c == '/';
        if (!ok)
            return false;
    }
    return n > 0 && n < AK_MAX_NAME;
}
