# -*- coding: utf-8 -*-
"""Numbers read from measurements and from recorded files, as the benchmark gate, its verdict and the all-reduce
choice trust them: a number is an int or a float, never a boolean (JSON ``true`` is not 1), finite (``NaN`` and
``Infinity`` parse as JSON in Python and compare false with everything, so a NaN passes every ``<`` check), and
never an ``OverflowError`` (an int too large for a float is no measurement either). Pure functions, no I/O.
"""
from __future__ import annotations

import math


def finite(value):
    """VALUE as a float when it is a finite number (int or float, not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def shown(value):
    """VALUE for a message: short, whatever it is (a 400-digit int is not printed whole)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def rate_problem(value, what):
    """Why VALUE is not a rate (a finite number above 0), naming WHAT; None when it is one."""
    number = finite(value)
    if number is not None and number > 0:
        return None
    if isinstance(value, bool):
        why = "a boolean, not a number"
    elif not isinstance(value, (int, float)):
        why = "not a number"
    elif number is None:
        why = "not a finite number"
    else:
        why = "not above 0"
    return "%s is %s (%s): a rate must be a finite number above 0" % (what, shown(value), why)


def whole(value):
    """VALUE as an int when it is a whole, non-negative, finite number (8 or 8.0; not true, not "8"), else None."""
    number = finite(value)
    if number is None or number < 0 or number != int(number):
        return None
    return int(number)


def json_safe(value):
    """VALUE with every non-finite float (and every int too large for a float) replaced by None, so that what is
    written is strict JSON and holds no number a reader could trust by mistake. Containers are copied."""
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    return value if finite(value) is not None else None
