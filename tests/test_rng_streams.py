"""The public RNG stream registry (issue 54): 17 stream numbers lived in 15 modules with no registry,
so nothing stopped two uses of `--seed` from sharing one. Now every number is named in
`fedgen_debug.rng_streams`, distinct, unchanged (outputs stay bit-identical), and no module keeps its own."""

import ast
import os

from conftest import REPO_ROOT

from fedgen_debug import rng_streams

SOURCE_FOLDERS = ("fedgen_debug", "models", "selectors", "app")
# The registries themselves: the public one, and the secret one (`runs/secret.py` STREAMS, by name).
REGISTRIES = {os.path.join("fedgen_debug", "rng_streams.py"), os.path.join("fedgen_debug", "runs", "secret.py")}
# Splits a seed already drawn from the secret (not a stream of `--seed`): the adaptive clip's two queries.
SECRET_SPLITS = {os.path.join("fedgen_debug", "training", "dp_query.py")}
RNG_CONSTRUCTORS = {"client_rng", "default_rng", "SeedSequence", "exact_share", "device_draw", "Random"}

# The numbers before the registry, as each module had them: a renumbering would change which devices
# carry a bug or a canary, and with it every published verdict.
NUMBERS_BEFORE = {
    "PIXEL_INVERSION": 0x1A7, "TOKENIZATION": 0x70C, "ROLLOUT": 0x2011, "CANARY_TEXTS": 0xCA4A,
    "LM_CANARY_DEVICES": 0xCA4B, "GAN_CANARY_DEVICES": 0xCA4C, "IMAGE_CANARIES": 0x6C1F, "GLYPH_REFERENCES": 0x6C20,
    "CANARY_REFERENCES": 0xE4, "UPDATE_CANARY_DIRECTIONS": 7_919, "GAN_SNAPSHOT_NOISE": 0x5A4,
    "GAN_CLIENT_SHUFFLE": 0x6A5, "PRIMARY_CNN_SPLIT": 0xC11, "PRIMARY_CNN_BATCHES": 0xC12, "SYNTHETIC_LEXICON": 0x1E,
    "FLEET_MEMBERSHIP": 0xF1E, "FLEET_ORDER": 0xF1F, "RANDOM_SELECTION": 0x71, "PUBLIC_DISCRIMINATOR": 0xD15C,
}


def test_stream_numbers_are_distinct():
    numbers = list(rng_streams.PUBLIC_STREAMS.values())
    assert len(numbers) == len(set(numbers)), rng_streams.PUBLIC_STREAMS
    offsets = list(rng_streams.SEED_OFFSETS.values())
    assert len(offsets) == len(set(offsets)), rng_streams.SEED_OFFSETS


def test_stream_numbers_are_the_ones_the_modules_had():
    """Every stream keeps its number (new ones may be added, never renumbered)."""
    assert NUMBERS_BEFORE.items() <= rng_streams.PUBLIC_STREAMS.items()


def test_the_registry_points_to_the_secret_streams():
    assert "runs.secret.STREAMS" in rng_streams.__doc__


def _sources():
    for folder in SOURCE_FOLDERS:
        for root, _, files in os.walk(os.path.join(REPO_ROOT, folder)):
            for name in sorted(files):
                if name.endswith(".py"):
                    path = os.path.join(root, name)
                    with open(path, encoding="utf-8") as f:
                        yield os.path.relpath(path, REPO_ROOT), ast.parse(f.read())


def _name(node) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _int_literals(node):
    return [n.value for n in ast.walk(node)
            if isinstance(n, ast.Constant) and isinstance(n.value, int) and not isinstance(n.value, bool)]


def _stream_literals(node) -> list[int]:
    """Int literals an RNG constructor mixes in: the argument itself, or an element of the list or tuple
    it is given (`[seed, 0xC11]`, `spawn_key=(0x6C20,)`, `[...] + [1]`); not e.g. `digest[:8]`."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return [node.value]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [value for element in node.elts for value in _stream_literals(element)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _stream_literals(node.left) + _stream_literals(node.right)
    return []


def _own_streams(relative: str, tree) -> list[str]:
    """What in one module looks like a stream of its own: a module constant named *STREAM*, an int
    literal given to an RNG constructor, or an int literal added to a seed (`seed + 1000`: a second data
    set's seed). A seed scaled for one model's layers (`seed * 8 + k`, models/cnn.py) is not a stream."""
    found = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and _int_literals(node.value):
            for target in node.targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name) and "STREAM" in name.id.upper():
                        found.append(f"{relative}:{node.lineno} {name.id} = ...")
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _name(node.func) in RNG_CONSTRUCTORS and relative not in SECRET_SPLITS:
            arguments = [*node.args, *(k.value for k in node.keywords)]
            if any(_stream_literals(a) for a in arguments):
                found.append(f"{relative}:{node.lineno} {_name(node.func)}(... literal ...)")
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.BitXor)):
            sides = (node.left, node.right)
            if any("seed" in _name(s).lower() for s in sides) and any(
                    isinstance(s, ast.Constant) and isinstance(s.value, int) for s in sides):
                found.append(f"{relative}:{node.lineno} seed {type(node.op).__name__} literal")
    return found


def test_no_module_keeps_a_stream_number_of_its_own():
    own = [hit for relative, tree in _sources() if relative not in REGISTRIES for hit in _own_streams(relative, tree)]
    assert not own, "stream numbers outside fedgen_debug/rng_streams.py:\n" + "\n".join(own)


def test_the_check_sees_a_stream_of_its_own():
    """The check above would have failed before the registry, on each of these forms."""
    for text in ("_STREAM = 0x1A7", "rng = client_rng(seed, cid, 0x71)",
                 "rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0x6C20,)))",
                 "data = load(seed=config.seed + 1000)"):
        assert _own_streams("x.py", ast.parse(text)), text
    assert not _own_streams("x.py", ast.parse("rng = client_rng(seed, cid, rng_streams.RANDOM_SELECTION)"))


def test_golden_bug_assignment_is_unchanged():
    from fedgen_debug.device.pixels import PixelInversionBug

    ids = [f"c{i}" for i in range(10)]
    assert PixelInversionBug(0.5, seed=1).affected_clients(ids) == {"c0", "c1", "c3", "c6", "c9"}
