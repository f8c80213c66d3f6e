"""Validate OpenLineage events (JSON files, or one JSON document per line
on stdin with `-`) against the official spec 2-0-2 and the schema of
every facet they carry (tests/openlineage/, copied from the OpenLineage
repository; idem's own facets: schemas/openlineage-facets.json), with
PyPI jsonschema. Prints {"events": N} or exits 1 naming the first
violation."""

import json
import pathlib
import sys
import uuid
from datetime import datetime

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

ROOT = pathlib.Path(__file__).resolve().parent.parent
SPEC = ROOT / "tests/openlineage"


def registry():
    resources = []
    for path in [SPEC / "OpenLineage.json", *sorted((SPEC / "facets").glob("*.json")),
                 ROOT / "schemas/openlineage-facets.json"]:
        doc = json.loads(path.read_text())
        resources.append((doc["$id"], Resource.from_contents(doc)))
    return Registry().with_resources(resources)


def check(event, reg):
    spec = reg.contents("https://openlineage.io/spec/2-0-2/OpenLineage.json")
    Draft202012Validator(spec, registry=reg).validate(event)
    # Formats jsonschema leaves unchecked without extra packages.
    uuid.UUID(event["run"]["runId"])
    datetime.fromisoformat(event["eventTime"].replace("Z", "+00:00"))
    facets = []
    for part in ("run", "job"):
        facets += list(event.get(part, {}).get("facets", {}).items())
    for ds in event.get("inputs", []) + event.get("outputs", []):
        for key in ("facets", "inputFacets", "outputFacets"):
            facets += list(ds.get(key, {}).items())
    parent = event["run"].get("facets", {}).get("parent")
    if parent:
        uuid.UUID(parent["run"]["runId"])
    for name, facet in facets:
        url = facet["_schemaURL"]
        base, _, pointer = url.partition("#")
        schema = {"$ref": url} if pointer else {"$ref": base}
        try:
            Draft202012Validator(schema, registry=reg).validate(facet)
        except Exception as e:
            raise SystemExit(f"facet {name} ({url}): {e}")


def main():
    reg = registry()
    args = sys.argv[1:]
    events = []
    if args == ["-"]:
        events = [json.loads(line) for line in sys.stdin if line.strip()]
    else:
        events = [json.loads(pathlib.Path(p).read_text()) for p in args]
    for e in events:
        try:
            check(e, reg)
        except SystemExit:
            raise
        except Exception as err:
            raise SystemExit(f"{e.get('eventType')} event does not validate: {err}")
    print(json.dumps({"events": len(events)}))


if __name__ == "__main__":
    main()
