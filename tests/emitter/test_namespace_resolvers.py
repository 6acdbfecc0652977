"""Dataset namespace resolvers: the Java client's resolver tests (HostList..., Pattern...,
PatternMatchingGroup..., DatasetNamespaceCombinedResolverTest) as tables, plus the configuration's errors."""
from __future__ import annotations

import pytest

from emitter.naming.resolvers import namespace_resolvers, resolve_namespace

HOSTS = {"type": "hostList", "hosts": "[host1;host2]"}
GROUP = {"type": "patternGroup", "regex": r"(?<cluster>[a-zA-Z-]+)-(\d)+\.company\.com:[\d]*",
         "matchingGroup": "cluster"}
PATTERN = {"type": "pattern", "regex": r"cassandra-prod(\d)+\.company\.com"}

# (resolver config {name: entry}, namespace, expected)
CASES = [
    ({"cluster": HOSTS}, "postgres://host3:5432", "postgres://host3:5432"),
    ({"cluster": HOSTS}, "postgres://host2:5432", "postgres://cluster:5432"),
    ({"cluster": {**HOSTS, "schema": "kafka"}}, "postgres://host2:5432", "postgres://host2:5432"),
    ({"cluster": {**HOSTS, "schema": "postgres"}}, "postgres://host2:5432", "postgres://cluster:5432"),
    ({"cluster": HOSTS}, "postgres://HOST1:5432", "postgres://cluster:5432"),
    ({"cluster": {"type": "hostList", "hosts": []}}, "postgres://host3:5432", "postgres://host3:5432"),
    ({"cluster": {"type": "HOSTLIST", "hosts": ["host1"]}}, "postgres://host1:5432", "postgres://cluster:5432"),
    ({"kafka-cluster-prod": {"type": "hostList", "hosts": "[kafka-host;kafka-host-other]"}},
     "kafka://kafka-host:9092", "kafka://kafka-cluster-prod:9092"),
    ({"x": GROUP}, "cassandra://cassandra-prod-893472.other-domain.com:8080/whatever",
     "cassandra://cassandra-prod-893472.other-domain.com:8080/whatever"),
    ({"x": GROUP}, "cassandra://cassandra-prod-893472.company.com:8080/whatever", "cassandra://cassandra-prod/whatever"),
    ({"x": {**GROUP, "schema": "kafka"}}, "cassandra://cassandra-prod-893472.company.com:8080/whatever",
     "cassandra://cassandra-prod-893472.company.com:8080/whatever"),
    ({"x": {**GROUP, "schema": "cassandra"}}, "cassandra://cassandra-prod-893472.company.com:8080/whatever",
     "cassandra://cassandra-prod/whatever"),
    ({"cassandra-cluster-prod": PATTERN}, "kafka://kafka-prod893472.company.com:9091",
     "kafka://kafka-prod893472.company.com:9091"),
    ({"cassandra-cluster-prod": PATTERN}, "cassandra://cassandra-prod893472.company.com",
     "cassandra://cassandra-cluster-prod"),
    ({"cassandra-cluster-prod": {**PATTERN, "schema": "kafka"}}, "cassandra://cassandra-prod893472.company.com",
     "cassandra://cassandra-prod893472.company.com"),
    # the first resolver that changes a namespace wins; the others are not applied after it
    ({"first": {"type": "hostList", "hosts": ["host1"]}, "second": {"type": "hostList", "hosts": ["first"]}},
     "postgres://host1:5432", "postgres://first:5432"),
    ({"a": {"type": "hostList", "hosts": ["nope"]}, "b": HOSTS}, "postgres://host2:5432", "postgres://b:5432"),
    ({}, "some-namespace", "some-namespace"),
]


@pytest.mark.parametrize("config, namespace, expected", CASES)
def test_resolve_namespace(config, namespace, expected):
    assert resolve_namespace(namespace_resolvers(config), namespace) == expected


@pytest.mark.parametrize("config, message", [
    ({"x": {"type": "hostlst", "hosts": ["a"]}}, "'x': type 'hostlst' is not one of hostList, pattern, patternGroup"),
    ({"x": {"type": "pattern"}}, "'x': pattern needs a regex"),
    ({"x": {"type": "pattern", "regex": "(unclosed"}}, "'x': bad regex"),
    ({"x": {"type": "patternGroup", "regex": "(?<c>a)"}}, "'x': patternGroup needs a matchingGroup of its regex"),
    ({"x": {"type": "patternGroup", "regex": "(?<c>a)", "matchingGroup": "d"}}, "needs a matchingGroup"),
])
def test_invalid_resolvers_are_named(config, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        namespace_resolvers(config)
