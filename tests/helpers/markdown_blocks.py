"""The sections and fenced code blocks of a Markdown page, so a test runs a guide's commands as the page writes
them."""
import re

FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.S | re.M)


def sections(text):
    """{'## ' heading: the text up to the next '## ' heading}."""
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts), 2)}


def blocks(text, lang):
    """The bodies of the fenced blocks of one language, in order."""
    return [body for kind, body in FENCE.findall(text) if kind == lang]
