"""YAML as pasted: anchors and aliases allowed, their expansion bounded.

Compose files share blocks with `&anchor` / `*alias` (`x-common: &common`, `<<: *common`), so
aliases cannot be refused. PyYAML builds an alias as a second reference to the same object, which
is cheap to load, but whatever walks or prints the result expands it: nine nested levels of nine
aliases in 395 bytes become 27 MB of output. The loader counts what every alias adds, as if it
were written out (a scalar counts its length, a collection its items), and stops past a bound
proportional to the text it was given.
"""

from __future__ import annotations

from typing import Any

import yaml

# What aliases may add, in expanded scalar characters + items: the text's own size, 4 times over,
# plus a floor for small files that share one large block many times.
EXPANSION_FACTOR = 4
EXPANSION_FLOOR = 16 * 1024


class AliasBombError(yaml.YAMLError):
    """The document's aliases expand past the bound."""


def _size(node: yaml.Node, sizes: dict[int, tuple[yaml.Node, int]], active: set[int]) -> int:
    """The node as if written out with every alias expanded (memoised; a node that contains
    itself, `&a [*a]`, counts as the bound: it has no finite expansion)."""
    key = id(node)
    if key in sizes:
        return sizes[key][1]
    if key in active:
        return 1 << 62
    if isinstance(node, yaml.ScalarNode):
        return len(str(node.value)) + 1
    active.add(key)
    total = 1
    if isinstance(node, yaml.SequenceNode):
        total += sum(_size(item, sizes, active) for item in node.value)
    elif isinstance(node, yaml.MappingNode):
        total += sum(_size(k, sizes, active) + _size(v, sizes, active) for k, v in node.value)
    active.discard(key)
    sizes[key] = (node, min(total, 1 << 62))  # the node is kept so that its id is never reused
    return sizes[key][1]


def _loader(text: str) -> type[yaml.SafeLoader]:
    limit = EXPANSION_FACTOR * len(text) + EXPANSION_FLOOR

    class Bounded(yaml.SafeLoader):
        expanded = 0
        sizes: dict[int, tuple[yaml.Node, int]]

        def compose_node(self, parent: Any, index: Any) -> Any:
            if not self.check_event(yaml.AliasEvent):
                anchor = getattr(self.peek_event(), "anchor", None)
                open_anchors = self.__dict__.setdefault("open_anchors", set())
                if anchor is None or anchor in open_anchors:
                    return super().compose_node(parent, index)
                open_anchors.add(anchor)
                try:
                    return super().compose_node(parent, index)
                finally:
                    open_anchors.discard(anchor)
            anchor = self.peek_event().anchor
            if anchor in self.__dict__.get("open_anchors", ()):
                raise AliasBombError(f"alias *{anchor} is used inside its own anchor (it never ends)")
            if anchor in self.anchors:
                sizes = self.__dict__.setdefault("sizes", {})
                self.expanded += _size(self.anchors[anchor], sizes, set())
                if self.expanded > limit:
                    raise AliasBombError(f"aliases expand to more than {limit:,} characters (an alias bomb?)")
            return super().compose_node(parent, index)

    return Bounded


class ScalarText(str):
    """A string scalar as load_all(keep_nodes=True) gives it: with the node it was read from, whose
    marks and style say where and how it is written (kvops/doctor/reading/serve_line.py)."""

    node: yaml.ScalarNode


def _construct_placed(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> ScalarText:
    text = ScalarText(loader.construct_scalar(node))
    text.node = node
    return text


def load(text: str) -> Any:
    """One document (yaml.safe_load), aliases bounded; AliasBombError past the bound."""
    return yaml.load(text, Loader=_loader(text))


def load_all(text: str, keep_nodes: bool = False) -> list[Any]:
    """Every document of a stream (yaml.safe_load_all), aliases bounded over the whole stream;
    with keep_nodes, each string a ScalarText."""
    loader = _loader(text)
    if keep_nodes:
        loader = type("Placing", (loader,), {})
        loader.add_constructor("tag:yaml.org,2002:str", _construct_placed)
    return list(yaml.load_all(text, Loader=loader))
