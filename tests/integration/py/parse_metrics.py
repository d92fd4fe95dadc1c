"""Parse OpenMetrics text from stdin with prometheus_client, strictly, twice: with the
OpenMetrics parser and with the classic text-format parser (what node_exporter's textfile
collector and the Pushgateway read). Prints one JSON object per sample, or exits 1 with the
parser's complaint."""
import json
import sys

from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics
from prometheus_client.parser import text_string_to_metric_families as classic

text = sys.stdin.read()
try:
    families = list(openmetrics(text))
    classic_samples = sum(len(f.samples) for f in classic(text))
except Exception as err:  # the parsers raise ValueError and friends
    print(f"invalid: {err}", file=sys.stderr)
    sys.exit(1)
samples = [s for f in families for s in f.samples]
if classic_samples != len(samples):
    print(f"the classic parser read {classic_samples} samples, OpenMetrics {len(samples)}", file=sys.stderr)
    sys.exit(1)
for family in families:
    if family.type != "gauge":
        print(f"{family.name} is a {family.type}, expected gauge", file=sys.stderr)
        sys.exit(1)
    for s in family.samples:
        print(json.dumps({"name": s.name, "labels": s.labels, "value": s.value}))
