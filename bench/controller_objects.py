"""The controller's object input per burst of watch events: validating the whole set of Package objects
(``load_objects``, what every burst cost before the object set was incremental) against
:class:`engine.package.object_set.ObjectSet` taking one changed object, and one event that changes no spec
(a status write: every pass makes some).

No cluster: the objects are built in memory as the API server gives them. Run:
``python -m bench.controller_objects [--packages 100 1000 5000]``.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from engine.package.load import load_objects, object_document
from engine.package.object_set import ObjectSet
from testkit.packages import package_doc

SOURCE = {"apiVersion": "helmdeck.dev/v1alpha1", "kind": "OCIRepository",
          "metadata": {"name": "web", "namespace": "apps"},
          "spec": {"url": "oci://registry.example.com/charts/web", "ref": {"tag": "0.1.0"}}}


def _package(i: int, edit: int = 0) -> dict[str, Any]:
    return package_doc(f"p{i:05d}", "apps", metadata={"resourceVersion": str(edit)},
                       chartRef={"kind": "OCIRepository", "name": "web"}, timeout="2m",
                       values={"value": f"v{i}", "edit": edit})


def _seconds(fn: Any, repeat: int) -> float:
    started = time.perf_counter()
    for i in range(repeat):
        fn(i)
    return (time.perf_counter() - started) / repeat


def run(count: int) -> None:
    objects = [_package(i) for i in range(count)]
    full = _seconds(lambda _i: load_objects(objects, [SOURCE]), max(1, min(10, 2000 // count)))
    incremental = ObjectSet()
    incremental.update({object_document(p)[0]: p for p in objects}, {object_document(SOURCE)[0]: SOURCE})
    origin = object_document(objects[count // 2])[0]
    one = _seconds(lambda i: incremental.update({origin: _package(count // 2, i + 1)}), 200)
    written = {**_package(count // 2, 200), "status": {"observedGeneration": 3}}
    status = _seconds(lambda i: incremental.update({origin: {**written, "metadata": {
        **written["metadata"], "resourceVersion": str(1000 + i)}}}), 1000)
    print(f"{count:6} Packages: whole set {full * 1000:8.1f} ms | one object changed {one * 1000:6.2f} ms "
          f"({full / one:,.0f}x less) | status write {status * 1000:6.3f} ms ({full / status:,.0f}x less)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--packages", type=int, nargs="+", default=[100, 1000, 5000])
    args = parser.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for count in args.packages:
        run(count)


if __name__ == "__main__":
    main()
