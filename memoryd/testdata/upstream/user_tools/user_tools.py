import json
import functools


def greet(name):
    """Say hello."""
    return f"Hello, {name}!"


def add(a, b):
    return a + b


# Cached lookup.
@functools.lru_cache(maxsize=None)
def lookup(key: str) -> str:
    '''Look a key up.

    Returns the JSON text.
    '''
    return json.dumps({"key": key})


def add(a, b):
    """Add two numbers (second version)."""
    return a + b


CONSTANT = 3


async def fetch(url):
    return url
