#!/usr/bin/env python3
"""Offline checks of daemonset/ and deploy/.

1. Every object is schema-checked against the Kubernetes API types of the
   official Python client (generated from the API's OpenAPI document): known
   fields only, right JSON types, required fields present.
2. The DaemonSet follows the project's deployment baseline
   (docs/operator-guide.md): system-node-critical, only the device plugin
   directory writable, /sys read-only, no capabilities, read-only root
   filesystem, RuntimeDefault seccomp, NODE_NAME, liveness on /healthz and
   readiness on /readyz (registered with the kubelet), requests and limits.
3. The ConfigMap's plugin configuration is accepted by the plugin itself.
4. `kubectl kustomize` renders the kustomization (when kubectl exists), and
   an overlay with the monitoring component: its Service and PodMonitor
   select the plugin pods and name their metrics port.
5. The Dockerfile's runtime stage installs the package of every shared
   library the shipped binaries need.
6. The DRA path (daemonset/dra), rendered here and compared with
   `kubectl kustomize` where kubectl exists: names, labels, selector,
   ConfigMap and NetworkPolicy of its own; the driver runs with the
   kubelet's plugin directories and the CDI directory writable and nothing
   else, the kubelet paths derived from --kubelet-root, a ServiceAccount
   bound to a ClusterRole with exactly the driver's verbs, a DeviceClass per
   resource of its ConfigMap (exactly --print-device-classes), and example
   claim templates pairing classes that exist on pcieRoot and pcieSwitch.
7. Both paths on one node (deploy/both-paths): distinct selectors and
   policies, the driver given the device plugin's own ConfigMap, and the
   two configurations selecting disjoint devices on a generated machine.
8. Renaming (tests/deploy/renamed*: namespace, namePrefix and nameSuffix,
   each alone and all together, with the example claim templates as a
   component): every reference resolves, as kustomize resolves it (a
   namespaced referral only from its own namespace).
9. Each YAML block of docs/dra-driver-guide.md is quoted verbatim from the
   file it names.
10. The NodeResourceTopology exporter's component (daemonset/nrt), rendered
   with the device plugin's kustomization: the API types; the exporter's
   DaemonSet (the baseline above, nothing of the host writable, the
   kubelet's directory and /sys read-only, its flags those the exporter
   takes); a ClusterRole with exactly its verbs; the admission policy
   keeping each node's exporter to its node's object; the CRD.

Usage: validate_manifests.py SOURCE_DIR PLUGIN_BINARY TOPOLOGY_INFO LIBTOPOLOGY
                             FIXTURE_ROOT [DRA_DRIVER_BINARY [NRT_EXPORTER]]
       validate_manifests.py --both-paths-configs SOURCE_DIR OUT_DIR
           (writes each path's configuration of deploy/both-paths, rendered)
       validate_manifests.py --render KUSTOMIZATION_DIR OUT_FILE
           (writes the objects rendered from the kustomization, a JSON list:
           what the real-node tests create on their cluster)
"""

import datetime
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml
import kubernetes.client as k8s

ERRORS = []
PLUGIN_BINARY = None  # topology-device-plugin
FIXTURE = None  # a generated machine's root


def error(where, message):
    ERRORS.append(f"{where}: {message}")


KINDS = {
    ("apps/v1", "DaemonSet"): "V1DaemonSet",
    ("v1", "ConfigMap"): "V1ConfigMap",
    ("networking.k8s.io/v1", "NetworkPolicy"): "V1NetworkPolicy",
    ("v1", "ServiceAccount"): "V1ServiceAccount",
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): "V1ClusterRole",
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"):
        "V1ClusterRoleBinding",
}


def check_type(value, type_name, path):
    """Checks a JSON value against a client type name ("V1PodSpec",
    "list[V1Container]", "dict(str, str)", "str", "int"...)."""
    if value is None:
        return
    match = re.fullmatch(r"list\[(.+)\]", type_name)
    if match:
        if not isinstance(value, list):
            error(path, f"expected a list, got {type(value).__name__}")
            return
        for i, item in enumerate(value):
            check_type(item, match.group(1), f"{path}[{i}]")
        return
    match = re.fullmatch(r"dict\(str, (.+)\)", type_name)
    if match:
        if not isinstance(value, dict):
            error(path, f"expected a mapping, got {type(value).__name__}")
            return
        for key, item in value.items():
            check_type(item, match.group(1), f"{path}.{key}")
        return
    if type_name == "str":
        if not isinstance(value, str):
            error(path, f"expected a string, got {value!r}")
        return
    if type_name == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            error(path, f"expected an integer, got {value!r}")
        return
    if type_name == "bool":
        if not isinstance(value, bool):
            error(path, f"expected true or false, got {value!r}")
        return
    if type_name in ("float",):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            error(path, f"expected a number, got {value!r}")
        return
    if type_name in ("object", "datetime"):
        return
    model = getattr(k8s, type_name, None)
    if model is None:
        error(path, f"unknown API type {type_name}")
        return
    if not isinstance(value, dict):
        error(path, f"expected a {type_name} mapping, got {value!r}")
        return
    json_to_attr = {json: attr for attr, json in model.attribute_map.items()}
    for key in value:
        if key not in json_to_attr:
            error(path, f"unknown field \"{key}\" for {type_name}")
    for key, item in value.items():
        if key in json_to_attr:
            attr = json_to_attr[key]
            check_type(item, model.openapi_types[attr], f"{path}.{key}")
    # The generated constructors enforce required fields and enums.
    try:
        model(**{json_to_attr[key]: item for key, item in value.items()
                 if key in json_to_attr})
    except ValueError as e:
        error(path, f"{type_name}: {e}")


def load_objects(path):
    with open(path) as f:
        return [doc for doc in yaml.safe_load_all(f) if doc is not None]


# Node Feature Discovery's label formats (its pci and usb sources: default
# fields class and vendor, 4 hex digits each; class may be 2 or 4 digits;
# ".sriov.capable" and ".sriov.configured" for SR-IOV), so that a placement
# term names a label NFD actually sets.
NFD_PREFIX = "feature.node.kubernetes.io/"
NFD_PCI = re.compile(r"^(pci|usb)-[0-9a-f]{2,4}(_[0-9a-f]{4}){0,3}"
                     r"\.(present|sriov\.capable|sriov\.configured)$")
NFD_OTHER = re.compile(r"^(cpu|kernel|memory|network|storage|system|"
                       r"custom|rule|local)-[A-Za-z0-9_.-]+$")


def check_node_labels(daemonset, where):
    spec = daemonset["spec"]["template"]["spec"]
    keys = list(spec.get("nodeSelector", {}))
    affinity = spec.get("affinity", {}).get("nodeAffinity", {})
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution", {})
    for term in required.get("nodeSelectorTerms", []):
        keys += [e["key"] for e in term.get("matchExpressions", [])]
    for pref in affinity.get("preferredDuringSchedulingIgnoredDuringExecution", []):
        keys += [e["key"] for e in pref.get("preference", {}).get(
            "matchExpressions", [])]
    for key in keys:
        if not key.startswith(NFD_PREFIX):
            continue
        name = key[len(NFD_PREFIX):]
        if name.startswith(("pci-", "usb-")):
            if not NFD_PCI.match(name):
                error(where, f"node label {key} is not one Node Feature "
                             "Discovery sets (pci-<class>_<vendor>.present)")
        elif not NFD_OTHER.match(name):
            error(where, f"node label {key} is not in a Node Feature "
                         "Discovery source")


def check_nfd_examples(source, configmap):
    """Every NFD class-and-vendor label the docs and manifests show as an
    example names a class the shipped configuration selects for that
    vendor: copied as written, the placement then matches the nodes the
    configuration serves (NFD's <class> is the first 4 hex digits)."""
    config = yaml.safe_load(configmap.get("data", {}).get("config.yaml", ""))
    selected = {}
    for resource in (config or {}).get("resources", []):
        for selector in resource.get("selectors", []):
            for vendor in selector.get("vendors", []):
                selected.setdefault(vendor.lower(), set()).update(
                    c.lower() for c in selector.get("classes", []))
    # The full label, as a placement or its example names it (prose may
    # mention other classes by their short form).
    pattern = re.compile(
        r"feature\.node\.kubernetes\.io/pci-([0-9a-f]{4})_([0-9a-f]{4})"
        r"\.present")
    for relative in ("docs/operator-guide.md", "daemonset/daemonset.yaml"):
        text = open(os.path.join(source, relative)).read()
        for cls, vendor in pattern.findall(text):
            classes = selected.get(vendor)
            if classes and not any(cls.startswith(c) or c.startswith(cls)
                                   for c in classes):
                error(relative, f"NFD label pci-{cls}_{vendor}.present names "
                                f"class {cls}, but the shipped configuration "
                                f"selects {sorted(classes)} of vendor {vendor}")


DEVICE_PLUGIN_WRITABLE = ["/var/lib/kubelet/device-plugins", "/var/run/cdi"]
DRA_WRITABLE = ["/var/lib/kubelet/plugins/pci.libtopology.dev",
                "/var/lib/kubelet/plugins_registry",
                "/var/run/cdi"]


def check_baseline(daemonset, where, expected_writable=None):
    if expected_writable is None:
        expected_writable = DEVICE_PLUGIN_WRITABLE
    spec = daemonset["spec"]["template"]["spec"]
    if spec.get("priorityClassName") != "system-node-critical":
        error(where, "priorityClassName must be system-node-critical")
    if spec.get("hostNetwork") or spec.get("hostPID"):
        error(where, "no host network or PID namespace")
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    for container in spec["containers"]:
        c = f"{where}: container {container['name']}"
        sc = container.get("securityContext", {})
        if sc.get("privileged"):
            error(c, "must not be privileged")
        if sc.get("allowPrivilegeEscalation") is not False:
            error(c, "allowPrivilegeEscalation must be false")
        if sc.get("readOnlyRootFilesystem") is not True:
            error(c, "readOnlyRootFilesystem must be true")
        if sc.get("capabilities", {}).get("drop") != ["ALL"]:
            error(c, "capabilities must drop ALL")
        if sc.get("capabilities", {}).get("add"):
            error(c, "no capabilities may be added")
        if sc.get("seccompProfile", {}).get("type") != "RuntimeDefault":
            error(c, "seccompProfile must be RuntimeDefault")
        writable = []
        for mount in container.get("volumeMounts", []):
            volume = volumes.get(mount["name"])
            if volume is None:
                error(c, f"mount of unknown volume {mount['name']}")
                continue
            host = volume.get("hostPath", {}).get("path")
            if host == "/sys" and not mount.get("readOnly"):
                error(c, "/sys must be mounted read-only")
            if host is not None and not mount.get("readOnly"):
                writable.append(host)
        if sorted(writable) != expected_writable:
            error(c, f"only {expected_writable} (sockets, state and CDI "
                     f"specs) may be writable, found {sorted(writable)}")
        args = container.get("args", [])
        cdi_mounted = any(volumes.get(m["name"], {}).get("hostPath", {})
                          .get("path") == "/var/run/cdi"
                          for m in container.get("volumeMounts", []))
        if "--cdi-dir=/var/run/cdi" not in args or not cdi_mounted:
            error(c, "--cdi-dir=/var/run/cdi with the host's /var/run/cdi "
                     "mounted: CDI names must resolve on the node")
        env = {e["name"]: e for e in container.get("env", [])}
        field = env.get("NODE_NAME", {}).get("valueFrom", {}).get("fieldRef", {})
        if field.get("fieldPath") != "spec.nodeName":
            error(c, "NODE_NAME must come from spec.nodeName")
        for probe, path in (("livenessProbe", "/healthz"),
                            ("readinessProbe", "/readyz")):
            if container.get(probe, {}).get("httpGet", {}).get("path") != path:
                error(c, f"{probe} must GET {path}")
        resources = container.get("resources", {})
        for part in ("requests", "limits"):
            if not {"cpu", "memory"} <= set(resources.get(part, {})):
                error(c, f"resources.{part} needs cpu and memory")


def check_exposure(objects):
    """The plugin pods accept no traffic but the kubelet's probes (from the
    node, which NetworkPolicy never blocks): a NetworkPolicy selecting them
    denies every ingress, and no hostPort publishes the HTTP port on the
    node's addresses."""
    daemonsets = [d for _, d in objects if d["kind"] == "DaemonSet"]
    policies = [d for _, d in objects if d["kind"] == "NetworkPolicy"]
    for daemonset in daemonsets:
        pod_labels = daemonset["spec"]["template"]["metadata"].get("labels", {})
        selecting = [p for p in policies
                     if p["spec"].get("podSelector", {}).get("matchLabels")
                     and all(pod_labels.get(k) == v for k, v in
                             p["spec"]["podSelector"]["matchLabels"].items())]
        if not selecting:
            error("networkpolicy", "no NetworkPolicy selects the plugin pods")
        for policy in selecting:
            if "Ingress" not in policy["spec"].get("policyTypes", []) or \
                    policy["spec"].get("ingress"):
                error("networkpolicy",
                      "the base NetworkPolicy must deny every ingress")
        for container in daemonset["spec"]["template"]["spec"]["containers"]:
            for port in container.get("ports", []):
                if port.get("hostPort"):
                    error("daemonset", f"port {port.get('name')} has a hostPort")


def print_matches(binary, config_text, fixture):
    """topology-device-plugin --print-matches of `config_text` on the
    machine under `fixture`: the finished process."""
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        f.write(config_text)
        f.flush()
        return subprocess.run(
            [binary, "--config", f.name, "--host-root", fixture,
             "--print-matches"], capture_output=True, text=True)


def check_plugin_config(configmap, binary, fixture, where):
    text = configmap.get("data", {}).get("config.yaml")
    if text is None:
        error(where, "the ConfigMap has no config.yaml")
        return
    result = print_matches(binary, text, fixture)
    if result.returncode != 0:
        error(where, "the plugin rejects config.yaml: " +
              (result.stderr or result.stdout).strip())


def check_kustomize(directory):
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        print("kubectl not found: kustomize rendering skipped")
        return []
    result = subprocess.run([kubectl, "kustomize", directory],
                            capture_output=True, text=True)
    if result.returncode != 0:
        error(directory, "kubectl kustomize failed: " + result.stderr.strip())
        return []
    rendered = [d for d in yaml.safe_load_all(result.stdout) if d]
    for doc in rendered:
        if doc.get("metadata", {}).get("namespace") != "kube-system":
            error("kustomize", f"{doc.get('kind')} is not in kube-system")
    return rendered


def render_with_component(kubectl, daemonset_dir, component, where):
    """`kubectl kustomize` of an overlay of the base with `component`: the
    rendered objects, or None (reported) when kustomize fails."""
    with tempfile.TemporaryDirectory() as overlay:
        with open(os.path.join(overlay, "kustomization.yaml"), "w") as f:
            yaml.safe_dump({
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": [os.path.relpath(daemonset_dir, overlay)],
                "components": [os.path.relpath(component, overlay)],
            }, f)
        result = subprocess.run([kubectl, "kustomize", overlay],
                                capture_output=True, text=True)
    if result.returncode != 0:
        error(where, "kubectl kustomize failed: " + result.stderr.strip())
        return None
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def check_monitoring_component(daemonset_dir):
    """Renders base + components/monitoring and checks that the Service and
    the PodMonitor reach the plugin pods' metrics port."""
    kubectl = shutil.which("kubectl")
    component = os.path.join(daemonset_dir, "components", "monitoring")
    if not os.path.isdir(component):
        error("components/monitoring", "missing")
        return
    if kubectl is None:
        print("kubectl not found: monitoring component rendering skipped")
        return
    docs = render_with_component(kubectl, daemonset_dir, component,
                                 "components/monitoring")
    if docs is None:
        return
    by_kind = {d["kind"]: d for d in docs}
    for kind in ("DaemonSet", "Service", "PodMonitor", "NetworkPolicy"):
        if kind not in by_kind:
            error("components/monitoring", f"renders no {kind}")
            return
    daemonset = by_kind["DaemonSet"]
    template = daemonset["spec"]["template"]
    pod_labels = template["metadata"].get("labels", {})
    ports = {p.get("name"): p["containerPort"]
             for c in template["spec"]["containers"]
             for p in c.get("ports", [])}
    annotations = template["metadata"].get("annotations", {})
    if annotations.get("prometheus.io/port") != str(ports.get("http")):
        error("components/monitoring",
              "prometheus.io/port does not name the http containerPort")
    service = by_kind["Service"]
    check_type(service, "V1Service", "components/monitoring Service")
    selector = service["spec"].get("selector", {})
    if not selector or any(pod_labels.get(k) != v for k, v in selector.items()):
        error("components/monitoring", "the Service does not select the pods")
    for port in service["spec"].get("ports", []):
        if port.get("targetPort") not in ports and \
                port.get("targetPort") not in ports.values():
            error("components/monitoring",
                  f"Service targetPort {port.get('targetPort')} is no pod port")
    monitor = by_kind["PodMonitor"]
    if monitor.get("apiVersion") != "monitoring.coreos.com/v1":
        error("components/monitoring", "PodMonitor is not monitoring.coreos.com/v1")
    match = monitor["spec"].get("selector", {}).get("matchLabels", {})
    if not match or any(pod_labels.get(k) != v for k, v in match.items()):
        error("components/monitoring", "the PodMonitor does not select the pods")
    for endpoint in monitor["spec"].get("podMetricsEndpoints", []):
        if endpoint.get("port") not in ports or endpoint.get("path") != "/metrics":
            error("components/monitoring",
                  "PodMetricsEndpoint must scrape /metrics on a named pod port")
    # The scrape opens the metrics port alone, to a namespace selector.
    policy = by_kind["NetworkPolicy"]
    check_type(policy, "V1NetworkPolicy", "components/monitoring NetworkPolicy")
    rules = policy["spec"].get("ingress", [])
    if len(rules) != 1:
        error("components/monitoring",
              "the NetworkPolicy must open exactly one ingress rule")
    for rule in rules:
        rule_ports = [p.get("port") for p in rule.get("ports", [])]
        if not rule_ports or any(p not in ports and p not in ports.values()
                                 for p in rule_ports) or \
                any(p != ports.get("http") and p != "http" for p in rule_ports):
            error("components/monitoring",
                  "the NetworkPolicy must open only the http port")
        if not rule.get("from") or any("namespaceSelector" not in peer
                                       for peer in rule["from"]):
            error("components/monitoring",
                  "the NetworkPolicy must admit a namespace, not everyone")
    for doc in docs:
        if doc.get("metadata", {}).get("namespace") != "kube-system":
            error("components/monitoring", f"{doc['kind']} is not in kube-system")


def json_patch(document, operations, where):
    """Applies JSON patch operations (add, replace, remove, test; RFC 6902
    paths) as kustomize does, or reports why one cannot apply (a failed
    test included: kustomize refuses the whole patch then)."""
    import copy
    document = copy.deepcopy(document)
    for op in operations:
        parts = [p.replace("~1", "/").replace("~0", "~")
                 for p in op["path"].split("/")[1:]]
        parent = document
        try:
            for part in parts[:-1]:
                parent = parent[int(part)] if isinstance(parent, list) \
                    else parent[part]
            last = parts[-1]
            if op["op"] == "test":
                found = parent[int(last)] if isinstance(parent, list) \
                    else parent[last]
                if found != op["value"]:
                    raise ValueError(f"test: found {found!r}, "
                                     f"not {op['value']!r}")
                continue
            if op["op"] not in ("add", "replace", "remove"):
                raise ValueError(f"unsupported operation {op['op']}")
            if isinstance(parent, list):
                index = len(parent) if last == "-" else int(last)
                if op["op"] == "add":
                    parent.insert(index, op["value"])
                elif op["op"] == "replace":
                    parent[index] = op["value"]
                else:
                    del parent[index]
            else:
                if op["op"] == "replace" and last not in parent:
                    raise KeyError(last)
                if op["op"] in ("add", "replace"):
                    parent[last] = op["value"]
                else:
                    del parent[last]
        except (KeyError, IndexError, ValueError, TypeError) as e:
            error(where, f"patch {op['op']} {op['path']} does not apply: {e!r}")
    return document


def check_admission_policy(objects, account, where, namespace="kube-system"):
    """The policy that keeps each node's driver to its own node's slices:
    bound with Deny, matching the driver's ServiceAccount, comparing the
    token's node with the slice's spec.nodeName (oldObject on DELETE) and
    refusing a token bound to no node."""
    check_admission_policy_of(
        objects, account, "resourceslices",
        ("authentication.kubernetes.io/node-name", "oldObject",
         "spec.?nodeName", "!= ''"), where, namespace)


def check_admission_policy_of(objects, account, resource, needed_cel, where,
                              namespace):
    """A policy keeping each node's writer (`account`) to its own node's
    objects of `resource`, its CEL holding each of `needed_cel`."""
    policies = [o for o in objects if o["kind"] == "ValidatingAdmissionPolicy"]
    bindings = [o for o in objects
                if o["kind"] == "ValidatingAdmissionPolicyBinding"]
    if len(policies) != 1 or len(bindings) != 1:
        error(where, "one ValidatingAdmissionPolicy and one binding are needed "
                     "(each node's driver writes only its node's slices)")
        return
    policy, binding = policies[0], bindings[0]
    spec = policy.get("spec", {})
    if binding["spec"].get("policyName") != policy["metadata"]["name"] or \
            binding["spec"].get("validationActions") != ["Deny"]:
        error(where, "the binding must name the policy and Deny")
    if spec.get("failurePolicy") != "Fail":
        error(where, "the policy must fail closed (failurePolicy: Fail)")
    rules = spec.get("matchConstraints", {}).get("resourceRules", [])
    if not any(resource in r.get("resources", []) and
               set(r.get("operations", [])) >= {"CREATE", "UPDATE", "DELETE"}
               for r in rules):
        error(where, "the policy must cover creating, updating and deleting "
                     f"{resource}")
    # The condition compares the user with its quoted parts joined.
    user = f"system:serviceaccount:{namespace}:{account}"
    if not any(c.get("expression", "").startswith(
                   "request.userInfo.username == ") and
               "".join(re.findall(r"'([^']*)'", c["expression"])) == user
               for c in spec.get("matchConditions", [])):
        error(where, f"the policy must match the driver's user {user}")
    text = " ".join(v.get("expression", "") for v in spec.get("variables", []))
    text += " ".join(v.get("expression", "") for v in spec.get("validations",
                                                               []))
    for needed in needed_cel:
        if needed not in text:
            error(where, f"the policy's CEL lacks {needed!r}")


NAMESPACED = {"ConfigMap", "DaemonSet", "NetworkPolicy", "ServiceAccount",
              "Service", "PodMonitor", "ResourceClaimTemplate"}
# The kinds of the shipped objects kustomize itself knows to be
# cluster-scoped. Every other kind (DeviceClass, ValidatingAdmissionPolicy
# and its binding, which its built-in schema lacks) it treats as namespaced:
# a namespace transformer sets their namespace, and a name reference to one
# resolves only from a referrer in the same namespace.
KUSTOMIZE_CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding", "Namespace",
                            "CustomResourceDefinition"}
# The namespace kustomize sees on each rendered object, where it differs
# from what the object says (kinds outside NAMESPACED): by id, with the
# object itself, so that an object of an earlier rendering, freed, never
# lends its namespace to a new one given the same id.
KUSTOMIZE_NAMESPACE = {}


def kustomize_namespace(doc):
    """The namespace kustomize gives `doc` ("" for cluster-scoped kinds; no
    namespace is "default")."""
    if doc["kind"] in KUSTOMIZE_CLUSTER_SCOPED:
        return ""
    namespace = doc["metadata"].get("namespace", "")
    known = KUSTOMIZE_NAMESPACE.get(id(doc))
    if known is not None and known[0] is doc:
        namespace = known[1]
    return namespace or "default"


def references_resolve(referrer, referral):
    """Whether kustomize renames `referral`'s name in `referrer` (nameref's
    sameCurrentNamespaceAsReferrer): a cluster-scoped referrer or referral,
    a ServiceAccount, or both in one namespace."""
    if referrer["kind"] in KUSTOMIZE_CLUSTER_SCOPED or \
            referral["kind"] in KUSTOMIZE_CLUSTER_SCOPED or \
            referral["kind"] == "ServiceAccount":
        return True
    return kustomize_namespace(referrer) == kustomize_namespace(referral)


# kustomize's built-in name references the shipped objects use (referral
# kind: (referrer kind, path) ...), and for subjects the referral's kind.
NAME_REFERENCES = {
    "ConfigMap": [("DaemonSet", "spec/template/spec/volumes/configMap/name"),
                  ("DaemonSet", "spec/template/spec/volumes/projected/"
                                "sources/configMap/name")],
    "ServiceAccount": [("DaemonSet", "spec/template/spec/serviceAccountName"),
                       ("ClusterRoleBinding", "subjects/name"),
                       ("RoleBinding", "subjects/name")],
    "ClusterRole": [("ClusterRoleBinding", "roleRef/name")],
    "ValidatingAdmissionPolicy": [("ValidatingAdmissionPolicyBinding",
                                   "spec/policyName")],
}


def rename_field(node, parts, old, new, subject_kind=None):
    """Sets the field at `parts` (a kustomize fieldSpec path; lists are
    walked through) to `new` where it is `old`."""
    if isinstance(node, list):
        for item in node:
            rename_field(item, parts, old, new, subject_kind)
        return
    if not isinstance(node, dict) or not parts:
        return
    key = parts[0]
    if len(parts) == 1:
        if node.get(key) == old and (subject_kind is None or
                                     node.get("kind") == subject_kind):
            node[key] = new
        return
    rename_field(node.get(key), parts[1:], old, new, subject_kind)


def dotted(document, path, value=None):
    """The value at a kustomize replacement's field path (a.b.0.c), or sets
    it when `value` is given."""
    parts = path.split(".")
    node = document
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node[part]
    last = int(parts[-1]) if isinstance(node, list) else parts[-1]
    if value is None:
        return node[last]
    node[last] = value


def selects(selector, doc):
    return all(doc["metadata"]["name"] == v if k == "name" else
               doc.get(k) == v for k, v in selector.items())


def render(directory, where, component=False):
    """The objects of the kustomization in `directory`, rendered for the
    features the shipped ones use (what kustomize does with them, checked
    against `kubectl kustomize` where kubectl exists): resources (files, or
    directories with their own kustomization), components, JSON 6902
    patches with a kind and name target, namespace (namespaced kinds),
    namePrefix and nameSuffix with the name references above and those of
    `configurations`, metadata labels, and replacements (a source field, or
    a delimited part of it, copied to targets), in kustomize's order."""
    kustomization = yaml.safe_load(
        open(os.path.join(directory, "kustomization.yaml")))
    for key in kustomization:
        if key not in ("apiVersion", "kind", "namespace", "resources", "labels",
                       "images", "patches", "namePrefix", "nameSuffix",
                       "components", "configurations", "replacements"):
            error(where, f"kustomization.yaml: {key} is not rendered here")
    # A component adds to and transforms the objects of its includer.
    objects = component if component is not False else []
    for resource in kustomization.get("resources", []):
        path = os.path.normpath(os.path.join(directory, resource))
        if os.path.isdir(path):
            objects.extend(render(path, f"{where} -> {resource}"))
        elif os.path.exists(path):
            objects.extend(load_objects(path))
        else:
            error(where, f"resource {resource} does not exist")
    for entry in kustomization.get("components", []):
        path = os.path.normpath(os.path.join(directory, entry))
        render(path, f"{where} -> {entry}", component=objects)
    for patch in kustomization.get("patches", []):
        target = patch.get("target", {})
        matched = [i for i, doc in enumerate(objects)
                   if doc["kind"] == target.get("kind") and
                   doc["metadata"]["name"] == target.get("name")]
        if len(matched) != 1:
            error(where, f"a patch targets {target}, which is not one object")
            continue
        objects[matched[0]] = json_patch(objects[matched[0]],
                                         yaml.safe_load(patch["patch"]), where)
    namespace = kustomization.get("namespace")
    accounts = {d["metadata"]["name"] for d in objects
                if d["kind"] == "ServiceAccount"}
    for doc in objects:
        if namespace and doc["kind"] in NAMESPACED:
            doc["metadata"]["namespace"] = namespace
        elif namespace and doc["kind"] not in KUSTOMIZE_CLUSTER_SCOPED:
            KUSTOMIZE_NAMESPACE[id(doc)] = (doc, namespace)
        if namespace and doc["kind"] in ("ClusterRoleBinding", "RoleBinding"):
            for subject in doc.get("subjects", []):
                if subject.get("kind") == "ServiceAccount" and \
                        subject.get("name") in accounts:
                    subject["namespace"] = namespace
    references = {kind: list(specs) for kind, specs in NAME_REFERENCES.items()}
    for configuration in kustomization.get("configurations", []):
        config = yaml.safe_load(open(os.path.join(directory, configuration)))
        for entry in config.get("nameReference", []):
            references.setdefault(entry["kind"], []).extend(
                (spec["kind"], spec["path"]) for spec in entry["fieldSpecs"])
    RENDER_REFERENCES.update(references)
    prefix = kustomization.get("namePrefix", "")
    suffix = kustomization.get("nameSuffix", "")
    if prefix or suffix:
        for doc in objects:
            old = doc["metadata"]["name"]
            new = prefix + old + suffix
            doc["metadata"]["name"] = new
            for referrer_kind, path in RENDER_REFERENCES.get(doc["kind"], []):
                for referrer in objects:
                    if referrer["kind"] == referrer_kind and \
                            references_resolve(referrer, doc):
                        rename_field(referrer, path.split("/"), old, new,
                                     doc["kind"] if path.startswith("subjects")
                                     else None)
    for doc in objects:
        for entry in kustomization.get("labels", []):
            doc["metadata"].setdefault("labels", {}).update(entry["pairs"])
    for replacement in kustomization.get("replacements", []):
        source = replacement["source"]
        sources = [d for d in objects if selects(
            {k: v for k, v in source.items() if k != "fieldPath"}, d)]
        if len(sources) != 1:
            error(where, f"a replacement's source {source} is not one object")
            continue
        value = dotted(sources[0], source["fieldPath"])
        for target in replacement["targets"]:
            options = target.get("options", {})
            for doc in (d for d in objects if selects(target["select"], d)):
                for path in target["fieldPaths"]:
                    if "delimiter" in options:
                        parts = dotted(doc, path).split(options["delimiter"])
                        parts[options["index"]] = value
                        dotted(doc, path, options["delimiter"].join(parts))
                    else:
                        dotted(doc, path, value)
    return objects


# Name references declared by every kustomization rendered so far (a base's
# configurations apply in its overlays, as in kustomize).
RENDER_REFERENCES = {}


def pods_selected(selector, objects):
    """The DaemonSets among `objects` whose pod labels `selector` matches."""
    return sorted(d["metadata"]["name"] for d in objects
                  if d["kind"] == "DaemonSet" and all(
                      d["spec"]["template"]["metadata"].get("labels", {})
                      .get(k) == v for k, v in selector.items()))


def normalized(objects):
    """Objects keyed by kind and name, for comparing two renderings."""
    return {(d["kind"], d["metadata"]["name"]): d for d in objects}


def compare_with_kustomize(directory, objects, where):
    """`kubectl kustomize` of `directory` gives exactly `objects` (what this
    file's renderer made of it), so the checks here hold for what kubectl
    applies. Skipped without kubectl."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        print(f"kubectl not found: {where} compared with kustomize skipped")
        return
    result = subprocess.run([kubectl, "kustomize", directory],
                            capture_output=True, text=True)
    if result.returncode != 0:
        error(where, "kubectl kustomize failed: " + result.stderr.strip())
        return
    rendered = normalized(d for d in yaml.safe_load_all(result.stdout) if d)
    ours = normalized(objects)
    if set(rendered) != set(ours):
        error(where, f"kustomize renders {sorted(rendered)}, here "
                     f"{sorted(ours)}")
        return
    for key, doc in ours.items():
        theirs = rendered[key]
        if doc["kind"] not in NAMESPACED:
            # kustomize sets the namespace of kinds it does not know to be
            # cluster-scoped (DeviceClass); the API server ignores it.
            theirs = dict(theirs, metadata={
                k: v for k, v in theirs["metadata"].items()
                if k != "namespace"})
            doc = dict(doc, metadata={k: v for k, v in doc["metadata"].items()
                                      if k != "namespace"})
        if doc.get("kind") == "DaemonSet":
            # The image tag is kustomize's images transformer.
            for container in theirs["spec"]["template"]["spec"]["containers"]:
                container["image"] = container["image"].split(":")[0]
        if json_sorted(doc) != json_sorted(theirs):
            error(where, f"kustomize renders {key[0]} {key[1]} otherwise "
                         "than checked here")


def json_sorted(value):
    import json
    return json.dumps(value, sort_keys=True)


def matched_devices(config_text, where):
    """The PCI addresses topology-device-plugin --print-matches assigns to a
    resource of `config_text` on the fixture machine."""
    result = print_matches(PLUGIN_BINARY, config_text, FIXTURE)
    if result.returncode != 0:
        error(where, "the plugin rejects config.yaml: " +
              (result.stderr or result.stdout).strip())
        return set()
    matched = set()
    claimed = False
    for line in result.stdout.splitlines():
        if not line.startswith(" "):
            claimed = not line.startswith("unclaimed")
        elif claimed:
            matched.add(line.split()[0])
    return matched


def container_view(daemonset):
    """A DaemonSet's first container, the ConfigMap mounted at each of its
    mount paths (None for other volumes), and its --flag=value arguments."""
    pod = daemonset["spec"]["template"]["spec"]
    container = pod["containers"][0]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounted = {m["mountPath"]: volumes.get(m["name"], {})
               .get("configMap", {}).get("name")
               for m in container.get("volumeMounts", [])}
    args = dict(a.split("=", 1) for a in container.get("args", [])
                if a.startswith("--") and "=" in a)
    return container, mounted, args


def check_both_paths(source, dra_binary):
    """deploy/both-paths: the device plugin and the DRA driver on one node,
    each owning its devices, with distinct selectors and policies, and the
    driver's overlap check given the device plugin's real configuration."""
    where = "deploy/both-paths"
    directory = os.path.join(source, "deploy", "both-paths")
    if not os.path.isdir(directory):
        error(where, "missing")
        return
    objects = render(directory, where)
    compare_with_kustomize(directory, objects, where)
    daemonsets = {d["metadata"]["name"]: d for d in objects
                  if d["kind"] == "DaemonSet"}
    configmaps = {d["metadata"]["name"]: d for d in objects
                  if d["kind"] == "ConfigMap"}
    if len(daemonsets) != 2:
        error(where, f"two DaemonSets expected, found {sorted(daemonsets)}")
        return
    # `kubectl exec ds/<name>` and each policy reach their own pods only.
    for name, daemonset in daemonsets.items():
        selected = pods_selected(daemonset["spec"]["selector"]["matchLabels"],
                                 list(daemonsets.values()))
        if selected != [name]:
            error(where, f"DaemonSet {name}'s selector matches {selected}")
    for policy in (d for d in objects if d["kind"] == "NetworkPolicy"):
        selected = pods_selected(policy["spec"]["podSelector"]
                                 .get("matchLabels", {}),
                                 list(daemonsets.values()))
        if len(selected) != 1:
            error(where, f"NetworkPolicy {policy['metadata']['name']} "
                         f"selects {selected}")
    # Which ConfigMap each path reads, and the driver's view of the other.
    configs = {}
    plugin_configmap = None
    for name, daemonset in daemonsets.items():
        container, mounted, args = container_view(daemonset)
        config = args.get("--config", "")
        configs[name] = mounted.get(os.path.dirname(config))
        if container.get("command") == ["/usr/bin/topology-dra-driver"]:
            dra_name = name
            other = args.get("--device-plugin-config")
            if other is None:
                error(where, "the driver is not given the device plugin's "
                             "configuration (--device-plugin-config)")
            else:
                plugin_configmap = mounted.get(os.path.dirname(other))
        for path, configmap in mounted.items():
            if configmap is not None and configmap not in configmaps:
                error(where, f"{name} mounts ConfigMap {configmap}, which is "
                             "not rendered")
    plugin_names = [n for n in daemonsets if n != dra_name]
    if plugin_configmap != configs.get(plugin_names[0]):
        error(where, f"--device-plugin-config reads ConfigMap "
                     f"{plugin_configmap}, the device plugin reads "
                     f"{configs.get(plugin_names[0])}")
    if configs.get(dra_name) == configs.get(plugin_names[0]):
        error(where, "both paths read one ConfigMap: the driver would compare "
                     "itself with itself")
    # Each device is offered by exactly one path on a machine with both kinds.
    matched = {name: matched_devices(configmaps[configs[name]]["data"]
                                     ["config.yaml"], f"{where} {name}")
               for name in daemonsets if configs.get(name) in configmaps}
    if len(matched) == 2:
        first, second = matched.values()
        if first & second:
            error(where, f"both paths select {sorted(first & second)}")
        if not first or not second:
            error(where, f"each path must select devices on the fixture: "
                         f"{ {n: len(m) for n, m in matched.items()} }")


def check_dra_path(daemonset_dir, base_objects, dra_binary):
    """daemonset/dra: the DRA path with names, labels, ConfigMap and
    NetworkPolicy of its own."""
    where = "daemonset/dra"
    directory = os.path.join(daemonset_dir, "dra")
    if not os.path.isdir(directory):
        error(where, "missing")
        return
    kustomization = yaml.safe_load(
        open(os.path.join(directory, "kustomization.yaml")))
    objects = render(directory, where)
    for doc in objects:
        model = KINDS.get((doc.get("apiVersion"), doc.get("kind")))
        if model:
            check_type(doc, model, f"{where} {doc['kind']}")
        elif (doc.get("apiVersion"), doc.get("kind")) in (
                ("admissionregistration.k8s.io/v1",
                 "ValidatingAdmissionPolicy"),
                ("admissionregistration.k8s.io/v1",
                 "ValidatingAdmissionPolicyBinding")):
            pass  # checked below (the client here predates their models)
        elif (doc.get("apiVersion"), doc.get("kind")) != \
                ("resource.k8s.io/v1", "DeviceClass"):
            error(f"{where} {doc.get('kind')}", "unexpected apiVersion/kind")
    daemonsets = [d for d in objects if d["kind"] == "DaemonSet"]
    configmaps = [d for d in objects if d["kind"] == "ConfigMap"]
    if len(daemonsets) != 1 or len(configmaps) != 1:
        error(where, "the DRA path needs one DaemonSet and one ConfigMap")
        return
    daemonset = daemonsets[0]
    # Its own names: nothing shared with the device plugin's objects.
    base_names = {(d["kind"], d["metadata"]["name"]) for _, d in base_objects}
    for doc in objects:
        if (doc["kind"], doc["metadata"]["name"]) in base_names:
            error(where, f"{doc['kind']} {doc['metadata']['name']} has the "
                         "device plugin's name")
    base_daemonsets = [d for _, d in base_objects if d["kind"] == "DaemonSet"]
    selector = daemonset["spec"]["selector"]["matchLabels"]
    if pods_selected(selector, base_daemonsets + [daemonset]) != \
            [daemonset["metadata"]["name"]]:
        error(where, "the DaemonSet's selector must match its pods only, not "
                     "the device plugin's")
    for policy in (d for d in objects if d["kind"] == "NetworkPolicy"):
        selected = pods_selected(policy["spec"]["podSelector"]
                                 .get("matchLabels", {}),
                                 base_daemonsets + [daemonset])
        if selected != [daemonset["metadata"]["name"]]:
            error(where, f"NetworkPolicy {policy['metadata']['name']} "
                         f"selects {selected}, not the driver's pods only")
    container_names = {c["name"] for d in base_daemonsets
                       for c in d["spec"]["template"]["spec"]["containers"]}
    if daemonset["spec"]["template"]["spec"]["containers"][0]["name"] in \
            container_names:
        error(where, "the driver's container has the device plugin's name")
    volumes = daemonset["spec"]["template"]["spec"]["volumes"]
    if [v["configMap"]["name"] for v in volumes if "configMap" in v] != \
            [configmaps[0]["metadata"]["name"]]:
        error(where, "the DaemonSet must mount its own ConfigMap")
    check_plugin_config(configmaps[0], PLUGIN_BINARY, FIXTURE,
                        f"{where} ConfigMap")
    check_type(daemonset, "V1DaemonSet", f"{where} DaemonSet")
    check_baseline(daemonset, f"{where} DaemonSet", DRA_WRITABLE)
    pod = daemonset["spec"]["template"]["spec"]
    container = pod["containers"][0]
    if container.get("command") != ["/usr/bin/topology-dra-driver"]:
        error(where, "the container must run /usr/bin/topology-dra-driver")
    args = dict(a.split("=", 1) for a in container.get("args", [])
                if a.startswith("--") and "=" in a)
    driver = args.get("--driver-name", "pci.libtopology.dev")
    # The kubelet root is set once (--kubelet-root); the other kubelet
    # paths default below it, as the driver computes them.
    root = args.get("--kubelet-root", "/var/lib/kubelet")
    # The device manager's directory is the kubelet's fixed one, not below
    # --root-dir (pluginapi.DevicePluginPath).
    device_plugins = args.get("--device-plugin-dir",
                              "/var/lib/kubelet/device-plugins")
    if args.get("--plugin-dir", f"{root}/plugins/{driver}") != \
            f"{root}/plugins/{driver}":
        error(where, "--plugin-dir must be <kubelet root>/plugins/<driver>")
    if args.get("--registry-dir", f"{root}/plugins_registry") != \
            f"{root}/plugins_registry":
        error(where, "--registry-dir must be the kubelet's plugins_registry")
    mounts = {m["mountPath"]: m for m in container.get("volumeMounts", [])}
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    # Its own plugin directory, not every driver's (`plugins`).
    for path in (f"{root}/plugins_registry", f"{root}/plugins/{driver}",
                 device_plugins, f"{root}/pod-resources", "/var/run/cdi"):
        mount = mounts.get(path)
        if mount is None:
            error(where, f"{path} is not mounted where the driver uses it")
            continue
        host = volumes.get(mount["name"], {}).get("hostPath", {}).get("path")
        if host != path:
            error(where, f"{path} must be the host's {path}, not {host}")
    if not mounts.get(f"{root}/pod-resources", {}).get("readOnly"):
        error(where, "the kubelet's pod resources API is asked, never "
                     "written, by the driver: readOnly")
    if not mounts.get(device_plugins, {}).get("readOnly"):
        error(where, "the device plugin directory is read (the kubelet's "
                     "checkpoint), never written, by the driver: readOnly")
    if not pod.get("automountServiceAccountToken"):
        error(where, "the driver needs its ServiceAccount token (in-cluster "
                     "credentials)")
    accounts = [o for o in objects if o["kind"] == "ServiceAccount"]
    if [a["metadata"]["name"] for a in accounts] != \
            [pod.get("serviceAccountName")]:
        error(where, "serviceAccountName must be the component's "
                     "ServiceAccount")
    roles = {o["metadata"]["name"]: o for o in objects
             if o["kind"] == "ClusterRole"}
    bindings = [o for o in objects if o["kind"] == "ClusterRoleBinding"]
    verbs = {}
    for binding in bindings:
        role = roles.get(binding["roleRef"]["name"])
        bound = any(s.get("kind") == "ServiceAccount" and
                    s.get("name") == pod.get("serviceAccountName") and
                    s.get("namespace") == "kube-system"
                    for s in binding.get("subjects", []))
        if role is None or not bound:
            continue
        for rule in role.get("rules", []):
            for group in rule.get("apiGroups", []):
                for resource in rule.get("resources", []):
                    verbs.setdefault((group, resource), set()).update(
                        rule.get("verbs", []))
    wanted = {("resource.k8s.io", "resourceclaims"): {"get"},
              ("resource.k8s.io", "resourceslices"):
                  {"get", "list", "create", "update", "delete"},
              ("", "nodes"): {"get"}}
    if verbs != wanted:
        error(where, f"the driver's ServiceAccount must be granted exactly "
                     f"{wanted}, found {verbs}")
    check_admission_policy(objects, pod.get("serviceAccountName"), where)
    # A DeviceClass per resource of the configuration.
    config = yaml.safe_load(configmaps[0]["data"]["config.yaml"])
    resources = {r["name"] for r in config.get("resources", [])}
    classes = {}
    for doc in (o for o in objects if o["kind"] == "DeviceClass"):
        expressions = [s.get("cel", {}).get("expression", "")
                       for s in doc.get("spec", {}).get("selectors", [])]
        selected = [r for r in resources
                    if any(f'device.driver == "{driver}"' in e and
                           f'device.attributes["{driver}"].resource == "{r}"'
                           in e for e in expressions)]
        if len(selected) != 1:
            error(where, f"DeviceClass {doc['metadata']['name']} must select "
                         "the driver and one resource of the ConfigMap")
            continue
        classes[doc["metadata"]["name"]] = selected[0]
    if set(classes.values()) != resources:
        error(where, f"DeviceClasses cover {sorted(set(classes.values()))}, "
                     f"the ConfigMap has {sorted(resources)}")
    # One source of truth: the shipped DeviceClasses are exactly what
    # `topology-dra-driver --print-device-classes` writes for the ConfigMap.
    if dra_binary:
        with tempfile.TemporaryDirectory() as work:
            config_path = os.path.join(work, "config.yaml")
            with open(config_path, "w") as out:
                out.write(configmaps[0]["data"]["config.yaml"])
            printed = subprocess.run(
                [dra_binary, "--print-device-classes", "--config", config_path,
                 f"--driver-name={driver}"],
                capture_output=True, text=True, check=False)
        if printed.returncode != 0:
            error(where, f"--print-device-classes failed: {printed.stderr}")
        else:
            shipped = "---\n".join(
                open(os.path.join(directory, resource)).read()
                for resource in kustomization.get("resources", [])
                if resource.startswith("deviceclass-"))
            if shipped != printed.stdout:
                error(where, "the shipped DeviceClasses differ from "
                             "`topology-dra-driver --print-device-classes` for "
                             "the ConfigMap; write them with it")
    # The examples: a GPU and a NIC on one PCIe root, and on one switch.
    examples = render(os.path.join(directory, "examples"),
                      f"{where}/examples", component=[])
    matched = set()
    for template in examples:
        name = template["metadata"]["name"]
        if template.get("kind") != "ResourceClaimTemplate":
            error(where, f"example {name} is not a ResourceClaimTemplate")
            continue
        devices = template["spec"]["spec"]["devices"]
        requests = {r["name"]: r["exactly"]["deviceClassName"]
                    for r in devices["requests"]}
        for request, device_class in requests.items():
            if device_class not in classes:
                error(where, f"example {name}: request {request} names "
                             f"DeviceClass {device_class}, which is not here")
        for constraint in devices.get("constraints", []):
            if set(constraint.get("requests", [])) != set(requests):
                error(where, f"example {name}: the constraint must cover "
                             "every request")
            matched.add(constraint.get("matchAttribute"))
    for attribute in ("resource.kubernetes.io/pcieRoot",
                      f"{driver}/pcieSwitch"):
        if attribute not in matched:
            error(where, f"no example pairs devices on {attribute}")
    # kustomize itself renders the same objects (where kubectl exists).
    compare_with_kustomize(directory, objects, where)
    # The driver takes the arguments (flags and values) it is given.
    if dra_binary:
        result = subprocess.run([dra_binary, "--help"], capture_output=True,
                                text=True)
        for flag in args:
            if flag not in result.stdout:
                error(where, f"topology-dra-driver has no flag {flag}")


# tests/deploy/renamed*: operators' overlays of the DRA path, each renaming
# field on its own and all together: (directory, namespace, namePrefix,
# nameSuffix).
RENAMED_OVERLAYS = [("renamed", "accel-system", "team-", "-v2"),
                    ("renamed-namespace", "accel-system", "", ""),
                    ("renamed-prefix", None, "team-", ""),
                    ("renamed-suffix", None, "", "-v2")]


def check_renamed(source):
    """tests/deploy/renamed*, operators' overlays of the DRA path with their
    own namespace, a namePrefix or a nameSuffix, alone and together, and the
    example claim templates as a component: every name reference resolves
    (kustomize's own, those of daemonset/dra/name-references.yaml, and the
    admission policy's user through the replacements)."""
    for overlay, namespace, prefix, suffix in RENAMED_OVERLAYS:
        check_renamed_overlay(source, overlay, namespace, prefix, suffix)


def check_renamed_overlay(source, overlay, namespace, prefix, suffix):
    where = f"tests/deploy/{overlay}"
    directory = os.path.join(source, "tests", "deploy", overlay)
    objects = render(directory, where)
    compare_with_kustomize(directory, objects, where)
    names = {}
    for doc in objects:
        names.setdefault(doc["kind"], set()).add(doc["metadata"]["name"])
        if not doc["metadata"]["name"].startswith(prefix) or \
                not doc["metadata"]["name"].endswith(suffix):
            error(where, f"{doc['kind']} {doc['metadata']['name']} is not "
                         "renamed")
        if namespace and doc["kind"] in NAMESPACED and \
                doc["kind"] != "ResourceClaimTemplate" and \
                doc["metadata"].get("namespace") != namespace:
            error(where, f"{doc['kind']} {doc['metadata']['name']} is not in "
                         f"{namespace}")
    accounts = {(d["metadata"].get("namespace"), d["metadata"]["name"])
                for d in objects if d["kind"] == "ServiceAccount"}

    def resolves(kind, name, what):
        if name not in names.get(kind, set()):
            error(where, f"{what} names {kind} {name}, which is not rendered")

    account = None
    for doc in objects:
        kind, name = doc["kind"], doc["metadata"]["name"]
        if kind == "DaemonSet":
            pod = doc["spec"]["template"]["spec"]
            for volume in pod.get("volumes", []):
                if "configMap" in volume:
                    resolves("ConfigMap", volume["configMap"]["name"],
                             f"DaemonSet {name}")
            account = pod.get("serviceAccountName")
            resolves("ServiceAccount", account, f"DaemonSet {name}")
        elif kind == "ClusterRoleBinding":
            resolves("ClusterRole", doc["roleRef"]["name"], f"{kind} {name}")
            for subject in doc.get("subjects", []):
                if (subject.get("namespace"), subject.get("name")) not in \
                        accounts:
                    error(where, f"{kind} {name} binds ServiceAccount "
                                 f"{subject.get('namespace')}/"
                                 f"{subject.get('name')}, which is not "
                                 "rendered")
        elif kind == "ValidatingAdmissionPolicyBinding":
            resolves("ValidatingAdmissionPolicy", doc["spec"]["policyName"],
                     f"{kind} {name}")
        elif kind == "ResourceClaimTemplate":
            for request in doc["spec"]["spec"]["devices"]["requests"]:
                for choice in [request.get("exactly", {})] + \
                        request.get("firstAvailable", []):
                    if "deviceClassName" in choice:
                        resolves("DeviceClass", choice["deviceClassName"],
                                 f"{kind} {name} request {request['name']}")
    if "ResourceClaimTemplate" not in names:
        error(where, "the example claim templates are not rendered")
    if account is not None:
        check_admission_policy(objects, account, where,
                               namespace or "kube-system")

NRT_EXPORTER_RULES = [
    {"apiGroups": ["topology.node.k8s.io"],
     "resources": ["noderesourcetopologies"],
     "verbs": ["get", "create", "update"]},
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
    {"apiGroups": ["resource.k8s.io"],
     "resources": ["resourceslices", "deviceclasses"], "verbs": ["list"]},
]


def check_nrt_component(daemonset_dir, nrt_binary):
    """daemonset/nrt: a kustomize Component with the CRD, the exporter's
    DaemonSet, ServiceAccount, RBAC, NetworkPolicy and admission policy."""
    where = "daemonset/nrt"
    directory = os.path.join(daemonset_dir, "nrt")
    kustomization = yaml.safe_load(
        open(os.path.join(directory, "kustomization.yaml")))
    if kustomization.get("kind") != "Component":
        error(where, "kustomization.yaml must be a kustomize Component")
    objects = []
    for resource in kustomization.get("resources", []):
        path = os.path.join(directory, resource)
        if not os.path.exists(path):
            error(where, f"resource {resource} does not exist")
            continue
        objects.extend(load_objects(path))
    kinds = {}
    for doc in objects:
        key = (doc.get("apiVersion"), doc.get("kind"))
        kinds.setdefault(doc.get("kind"), []).append(doc)
        model = KINDS.get(key)
        if model:
            check_type(doc, model, f"{where} {doc['kind']}")
        elif key == ("apiextensions.k8s.io/v1", "CustomResourceDefinition"):
            check_type(doc, "V1CustomResourceDefinition", f"{where} CRD")
        elif key not in (("admissionregistration.k8s.io/v1",
                          "ValidatingAdmissionPolicy"),
                         ("admissionregistration.k8s.io/v1",
                          "ValidatingAdmissionPolicyBinding")):
            error(f"{where} {doc.get('kind')}", "unexpected apiVersion/kind")
    for kind in ("DaemonSet", "ServiceAccount", "ClusterRole",
                 "ClusterRoleBinding", "NetworkPolicy",
                 "CustomResourceDefinition"):
        if len(kinds.get(kind, [])) != 1:
            error(where, f"one {kind} is needed")
            return
    crd = kinds["CustomResourceDefinition"][0]
    if crd["metadata"]["name"] != "noderesourcetopologies.topology.node.k8s.io" \
            or not any(v["name"] == "v1alpha2" and v.get("served")
                       for v in crd["spec"]["versions"]):
        error(where, "the CRD must serve topology.node.k8s.io/v1alpha2")
    account = kinds["ServiceAccount"][0]["metadata"]
    role = kinds["ClusterRole"][0]
    if role.get("rules") != NRT_EXPORTER_RULES:
        error(where, f"the ClusterRole must grant exactly {NRT_EXPORTER_RULES}")
    binding = kinds["ClusterRoleBinding"][0]
    if binding["roleRef"]["name"] != role["metadata"]["name"] or \
            binding["subjects"] != [{"kind": "ServiceAccount",
                                     "name": account["name"],
                                     "namespace": account["namespace"]}]:
        error(where, "the ClusterRoleBinding must bind the ClusterRole to "
                     "the exporter's ServiceAccount")
    daemonset = kinds["DaemonSet"][0]
    spec = daemonset["spec"]["template"]["spec"]
    if spec.get("serviceAccountName") != account["name"]:
        error(where, "the DaemonSet must run as the exporter's ServiceAccount")
    policy = kinds["NetworkPolicy"][0]["spec"]
    if policy.get("ingress") != [] or policy.get("podSelector", {}).get(
            "matchLabels") != daemonset["spec"]["selector"]["matchLabels"]:
        error(where, "the NetworkPolicy must admit nobody to the exporter")
    # The device plugin's baseline, less what only a plugin or a driver
    # has (CDI); nothing of the host writable.
    saved = len(ERRORS)
    check_baseline(daemonset, where, expected_writable=[])
    ERRORS[saved:] = [e for e in ERRORS[saved:] if "--cdi-dir" not in e]
    container = spec["containers"][0]
    volumes = {v["name"]: v.get("hostPath", {}).get("path")
               for v in spec.get("volumes", [])}
    mounted = {volumes.get(m["name"]): m for m in container["volumeMounts"]}
    args = container.get("args", [])
    root = next((a.split("=", 1)[1] for a in args
                 if a.startswith("--kubelet-root=")), None)
    if root is None or root not in mounted or \
            mounted[root]["mountPath"] != root:
        error(where, "the kubelet's --kubelet-root must be mounted at its "
                     "own path (read-only)")
    if "--host-root=/host" not in args or \
            mounted.get("/sys", {}).get("mountPath") != "/host/sys":
        error(where, "--host-root=/host with the host's /sys at /host/sys")
    if container.get("command") != ["/usr/bin/topology-nrt-exporter"]:
        error(where, "the container must run /usr/bin/topology-nrt-exporter")
    if nrt_binary:
        usage = subprocess.run([nrt_binary, "--help"], capture_output=True,
                               text=True).stdout
        for arg in args:
            flag = arg.split("=", 1)[0]
            if flag not in usage:
                error(where, f"topology-nrt-exporter takes no {flag}")
    check_admission_policy_of(
        [d for d in objects if d["kind"].startswith("ValidatingAdmission")],
        account["name"], "noderesourcetopologies",
        ("authentication.kubernetes.io/node-name", "request.name", "!= ''"),
        where, account["namespace"])


def check_guide_quotes(source):
    """Every YAML block of the guides says which shipped or tested file it
    quotes (`<!-- quoted from PATH -->` on the line before) and appears
    there verbatim, so that the operating sections cannot drift from the
    files these checks and the tests run."""
    for guide in ("docs/dra-driver-guide.md",):
        text = open(os.path.join(source, guide), encoding="utf-8").read()
        for match in re.finditer(r"(^[^\n]*\n)?```yaml\n(.*?)^```", text,
                                 re.S | re.M):
            marker = re.fullmatch(r"<!-- quoted from (\S+) -->\n",
                                  match.group(1) or "")
            if marker is None:
                error(guide, "a YAML block does not say which file it quotes "
                             "(<!-- quoted from PATH -->): " +
                      match.group(2)[:60])
                continue
            path = os.path.join(source, marker.group(1))
            if not os.path.exists(path):
                error(guide, f"quotes {marker.group(1)}, which does not "
                             "exist")
            elif match.group(2) not in open(path, encoding="utf-8").read():
                error(guide, f"the block quoted from {marker.group(1)} is "
                             "not in it verbatim")


def check_dockerfile(path, binaries):
    text = open(path).read()
    stages = re.split(r"(?m)^FROM ", text)
    runtime = stages[-1]
    installed = set()
    for block in re.findall(r"apt-get install[^&]*", runtime):
        installed.update(w for w in block.replace("\\", " ").split()
                         if not w.startswith("-") and w not in
                         ("apt-get", "install"))
    if "LABEL org.opencontainers.image.title" not in text:
        error(path, "OCI labels missing")
    if "debian:12" not in stages[1]:
        error(path, "the build stage must be Debian 12")
    base = {"libc6", "libstdc++6", "libgcc-s1", "libc6-i386"}
    # What apt installs with them (their Depends, recursively).
    closure = subprocess.run(
        ["apt-cache", "depends", "--recurse", "--no-recommends",
         "--no-suggests", "--no-conflicts", "--no-breaks", "--no-replaces",
         "--no-enhances"] + sorted(installed),
        capture_output=True, text=True).stdout
    provided = installed | {line.strip() for line in closure.splitlines()
                            if line and not line.startswith(" ")}
    for binary in binaries:
        needed = subprocess.run(["objdump", "-p", binary], capture_output=True,
                                text=True, check=True).stdout
        for lib in re.findall(r"NEEDED\s+(\S+)", needed):
            if lib.startswith("libtopology"):
                continue  # copied from the build stage
            if re.match(r"lib(a|ub|t|l|hwa)san\.so", lib):
                continue  # sanitizer builds only; the image is a release build
            owner = subprocess.run(["dpkg", "-S", f"*/{lib}"],
                                   capture_output=True, text=True)
            packages = {line.split(":")[0] for line in
                        owner.stdout.splitlines() if ":" in line}
            if not packages:
                error(path, f"{lib} (needed by {os.path.basename(binary)}) "
                            "belongs to no installed package")
            elif not packages & (provided | base):
                error(path, f"runtime stage lacks {' or '.join(sorted(packages))}"
                            f" for {lib} of {os.path.basename(binary)}")


def self_test():
    """The label check rejects what NFD never sets and accepts its labels."""
    def daemonset(key):
        return {"spec": {"template": {"spec": {"affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": key, "operator": "In", "values": ["true"]}]}]}}}}}}}
    bad = ["feature.node.kubernetes.io/pci-present",
           "feature.node.kubernetes.io/pci-10de.present.yes",
           "feature.node.kubernetes.io/gpu-present"]
    good = ["feature.node.kubernetes.io/pci-0300_10de.present",
            "feature.node.kubernetes.io/pci-02_15b3.sriov.capable",
            "feature.node.kubernetes.io/cpu-cpuid.AVX512F",
            "kubernetes.io/arch"]
    for key in bad + good:
        before = len(ERRORS)
        check_node_labels(daemonset(key), key)
        rejected = len(ERRORS) > before
        del ERRORS[before:]
        if rejected != (key in bad):
            print(f"error: label check {'rejected' if rejected else 'accepted'} {key}")
            return 1
    print(f"label check: {len(bad)} rejected, {len(good)} accepted")
    return 0


def write_both_paths_configs(source, out_dir):
    """Writes the configurations deploy/both-paths gives each path, as its
    pods read them: device-plugin.yaml (the device plugin's ConfigMap) and
    dra-driver.yaml (the driver's), for the test that starts both programs
    with them on a generated machine."""
    where = "deploy/both-paths"
    objects = render(os.path.join(source, "deploy", "both-paths"), where)
    configmaps = {d["metadata"]["name"]: d for d in objects
                  if d["kind"] == "ConfigMap"}
    written = {}
    for daemonset in (d for d in objects if d["kind"] == "DaemonSet"):
        container, mounted, args = container_view(daemonset)
        configmap = configmaps.get(
            mounted.get(os.path.dirname(args.get("--config", ""))))
        if configmap is None:
            error(where, f"{daemonset['metadata']['name']} reads no rendered "
                         "ConfigMap")
            continue
        role = ("dra-driver"
                if container.get("command") == ["/usr/bin/topology-dra-driver"]
                else "device-plugin")
        written[role] = configmap["data"]["config.yaml"]
    if sorted(written) != ["device-plugin", "dra-driver"]:
        error(where, f"one DaemonSet of each path expected, found "
                     f"{sorted(written)}")
    os.makedirs(out_dir, exist_ok=True)
    for role, text in written.items():
        with open(os.path.join(out_dir, role + ".yaml"), "w") as out:
            out.write(text)
    for message in ERRORS:
        print("error:", message)
    return 1 if ERRORS else 0


def write_rendered(directory, out_file):
    """The kustomization in `directory` rendered, as a JSON list in
    `out_file`; 1 (saying why) when it cannot be."""
    import json
    objects = render(directory, directory)
    for message in ERRORS:
        print("error:", message)
    if ERRORS:
        return 1
    with open(out_file, "w") as out:
        json.dump(objects, out, indent=1)
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if sys.argv[1:2] == ["--both-paths-configs"] and len(sys.argv) == 4:
        return write_both_paths_configs(sys.argv[2], sys.argv[3])
    if sys.argv[1:2] == ["--render"] and len(sys.argv) == 4:
        return write_rendered(sys.argv[2], sys.argv[3])
    source, binary, info, libtopology, fixture = sys.argv[1:6]
    global PLUGIN_BINARY, FIXTURE
    PLUGIN_BINARY, FIXTURE = binary, fixture
    dra_binary = sys.argv[6] if len(sys.argv) > 6 else None
    nrt_binary = sys.argv[7] if len(sys.argv) > 7 else None
    daemonset_dir = os.path.join(source, "daemonset")
    objects = []
    kustomization = yaml.safe_load(
        open(os.path.join(daemonset_dir, "kustomization.yaml")))
    for key in kustomization:
        if key not in ("apiVersion", "kind", "namespace", "resources", "labels",
                       "images", "commonLabels", "configMapGenerator"):
            error("kustomization.yaml", f"unexpected key {key}")
    for resource in kustomization.get("resources", []):
        path = os.path.join(daemonset_dir, resource)
        if not os.path.exists(path):
            error("kustomization.yaml", f"resource {resource} does not exist")
            continue
        for i, doc in enumerate(load_objects(path)):
            where = f"{resource}#{i} ({doc.get('kind')})"
            model = KINDS.get((doc.get("apiVersion"), doc.get("kind")))
            if model is None:
                error(where, "unexpected apiVersion/kind")
                continue
            check_type(doc, model, where)
            objects.append((where, doc))
    for where, doc in objects:
        if doc["kind"] == "DaemonSet":
            check_baseline(doc, where)
            check_node_labels(doc, where)
            labels = doc["spec"]["selector"].get("matchLabels", {})
            template = doc["spec"]["template"]["metadata"].get("labels", {})
            if not labels or any(template.get(k) != v for k, v in labels.items()):
                error(where, "selector does not match the pod template labels")
            volumes = doc["spec"]["template"]["spec"]["volumes"]
            names = [v["configMap"]["name"] for v in volumes if "configMap" in v]
            configmaps = [d["metadata"]["name"] for _, d in objects
                          if d["kind"] == "ConfigMap"]
            for name in names:
                if name not in configmaps:
                    error(where, f"ConfigMap {name} is not part of the kustomization")
        if doc["kind"] == "ConfigMap":
            check_plugin_config(doc, binary, fixture, where)
            check_nfd_examples(source, doc)
    check_exposure(objects)
    rendered = check_kustomize(daemonset_dir)
    check_monitoring_component(daemonset_dir)
    check_dra_path(daemonset_dir, objects, dra_binary)
    check_both_paths(source, dra_binary)
    check_renamed(source)
    check_guide_quotes(source)
    check_nrt_component(daemonset_dir, nrt_binary)
    for doc in rendered:
        model = KINDS.get((doc.get("apiVersion"), doc.get("kind")))
        if model:
            check_type(doc, model, f"rendered {doc['kind']}")
    check_dockerfile(os.path.join(source, "deploy", "Dockerfile"),
                     [binary, info, libtopology] +
                     ([dra_binary] if dra_binary else []) +
                     ([nrt_binary] if nrt_binary else []))
    # "COPY . ." must not ship build trees or the repository history.
    ignore_path = os.path.join(source, ".dockerignore")
    if not os.path.exists(ignore_path):
        error(".dockerignore", "missing: COPY . . would send the build trees")
    else:
        patterns = {line.strip().rstrip("/") for line in open(ignore_path)
                    if line.strip() and not line.startswith("#")}
        for needed in ("build", ".git"):
            if needed not in patterns:
                error(".dockerignore", f"does not exclude {needed}/")
    for message in ERRORS:
        print("error:", message)
    print(f"{len(objects)} objects checked, {len(rendered)} rendered, "
          f"{len(ERRORS)} errors")
    return 1 if ERRORS else 0


if __name__ == "__main__":
    sys.exit(main())
