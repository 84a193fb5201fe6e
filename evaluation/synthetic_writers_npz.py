"""Many synthetic writers with few characters each, as an images `.npz` (uint8): a fleet large enough
for private settings that fits in memory.

The GAN's 5% at private settings needs tens of thousands of writers (qN = 1,000 sampled from N =
30,000 at z = 2 is ε ≈ 7 for 200 rounds). At the generator's FEMNIST-like ~190 characters a writer
that is 18 GB of float32 pixels; at ~24 a writer it is 0.8M images, 0.66 GB of uint8 pixels, rendered in about
6 minutes on 2 cores. Writer w is `synthetic_images.generate_writer(seed, w, ...)`, as in the data spec
`synthetic-images`, with fewer characters:

  .venv/bin/python evaluation/synthetic_writers_npz.py --writers 30000 --seed 1 --out writers30k.npz
  # then --data npz:writers30k.npz in train-gan or evaluation/gan_pixel_inversion.py
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import multiprocessing
import os

from fedgen_debug.data import client_data as cd
from fedgen_debug.data import npz
from fedgen_debug.data import synthetic_images as si
from fedgen_debug.progress import progress


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writers", type=int, default=30000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--median-examples", type=float, default=24.0)
    parser.add_argument("--min-examples", type=int, default=10)
    parser.add_argument("--max-examples", type=int, default=60)
    parser.add_argument("--processes", type=int, default=os.cpu_count())
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    config = si.SyntheticImagesConfig(args.writers, args.seed, args.min_examples, args.max_examples,
                                      args.median_examples)
    render = functools.partial(si.generate_writer, config.seed, config=config)
    with contextlib.ExitStack() as stack:
        if args.processes > 1:
            pool = stack.enter_context(multiprocessing.Pool(args.processes))
            rendered = pool.imap(render, range(args.writers), chunksize=64)
        else:
            rendered = map(render, range(args.writers))
        writers = {si.writer_id(w): cd.image_examples(pixels, labels) for w, (pixels, labels)
                   in enumerate(progress(rendered, total=args.writers, desc="rendering", unit="writer"))}
    images = npz.write_npz(cd.ArrayClientData(writers), args.out)
    print(f"{args.out}: {args.writers} writers, {images} images")


if __name__ == "__main__":
    main()
