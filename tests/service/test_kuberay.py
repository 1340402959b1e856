"""docker/kuberay/: the Kubernetes objects pass kubernetes-validate (strict: a misspelled field fails), the RayCluster
matches KubeRay's ray.io/v1 schema for the fields it uses, and every manifest gives each node the same secrets,
storage and versions as docker/compose.yaml."""

from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
KUBERAY = ROOT / "docker" / "kuberay"
K8S_VERSION = "1.33"  # a Kubernetes release KubeRay 1.6 supports

# KubeRay's RayCluster spec (ray-operator/config/crd/bases/ray.io_rayclusters.yaml, ray.io/v1), the fields these
# manifests use, with their types, enums and required fields as the CRD documents them; written out here with
# additionalProperties false so that a field KubeRay does not know fails (a CRD's structural schema drops it silently).
_START_PARAMS = {"type": "object", "additionalProperties": {"type": "string"}}
_RESOURCES = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"requests": {"type": "object"}, "limits": {"type": "object"}},
}
RAYCLUSTER_SPEC = {
    "type": "object",
    "additionalProperties": False,
    "required": ["headGroupSpec"],
    "properties": {
        "rayVersion": {"type": "string"},
        "enableInTreeAutoscaling": {"type": "boolean"},
        "authOptions": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"mode": {"enum": ["disabled", "token"]}, "secretName": {"type": "string"}},
        },
        "autoscalerOptions": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "version": {"enum": ["v1", "v2"]},
                "upscalingMode": {"enum": ["Default", "Aggressive", "Conservative"]},
                "idleTimeoutSeconds": {"type": "integer"},
                "resources": _RESOURCES,
            },
        },
        "headGroupSpec": {
            "type": "object",
            "additionalProperties": False,
            "required": ["template"],
            "properties": {"rayStartParams": _START_PARAMS, "template": {"type": "object"}},
        },
        "workerGroupSpecs": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["groupName", "maxReplicas", "minReplicas", "template"],
                "properties": {
                    "groupName": {"type": "string"},
                    "replicas": {"type": "integer", "minimum": 0},
                    "minReplicas": {"type": "integer", "minimum": 0},
                    "maxReplicas": {"type": "integer", "minimum": 0},
                    "rayStartParams": _START_PARAMS,
                    "template": {"type": "object"},
                },
            },
        },
    },
}


def _objects() -> list[dict]:
    return [doc for path in sorted(KUBERAY.glob("*.yaml")) for doc in yaml.safe_load_all(path.read_text()) if doc]


def _by_kind(kind: str) -> list[dict]:
    return [o for o in _objects() if o["kind"] == kind]


def _pod_templates() -> dict[str, dict]:
    """Every pod template: the controller's Deployment's, the Ray head's and each worker group's."""
    (cluster,) = _by_kind("RayCluster")
    templates = {"head": cluster["spec"]["headGroupSpec"]["template"]}
    templates |= {g["groupName"]: g["template"] for g in cluster["spec"]["workerGroupSpecs"]}
    return templates | {d["metadata"]["name"]: d["spec"]["template"] for d in _by_kind("Deployment")}


@pytest.mark.parametrize("obj", [o for o in _objects() if o["apiVersion"] in ("v1", "apps/v1")], ids=lambda o: o["kind"])
def test_each_kubernetes_object_is_valid_in_strict_mode(obj):
    kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def test_the_raycluster_matches_kuberays_schema_and_its_pods_are_valid_pod_templates():
    (cluster,) = _by_kind("RayCluster")
    assert cluster["apiVersion"] == "ray.io/v1"
    jsonschema.validate(cluster["spec"], RAYCLUSTER_SPEC)
    for name, template in _pod_templates().items():
        pod = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": name}, "template": template}
        kubernetes_validate.validate(pod, K8S_VERSION, strict=True)


def test_a_misspelled_field_fails_each_check():
    (cluster,) = _by_kind("RayCluster")
    group = {**cluster["spec"]["workerGroupSpecs"][0], "minReplica": 0}
    with pytest.raises(jsonschema.ValidationError, match="minReplica"):
        jsonschema.validate({**cluster["spec"], "workerGroupSpecs": [group]}, RAYCLUSTER_SPEC)
    (deployment,) = _by_kind("Deployment")
    broken = {**deployment, "spec": {**deployment["spec"], "replica": 1}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)


def test_the_gpu_group_scales_from_zero_and_the_controller_lets_shapes_wait_for_it():
    (cluster,) = _by_kind("RayCluster")
    assert cluster["spec"]["enableInTreeAutoscaling"] is True
    (gpu,) = [g for g in cluster["spec"]["workerGroupSpecs"] if g["groupName"] == "gpu"]
    assert gpu["minReplicas"] == gpu["replicas"] == 0 < gpu["maxReplicas"]
    assert gpu["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert cluster["spec"]["headGroupSpec"]["rayStartParams"]["num-cpus"] == "0"  # no trial on the head
    (deployment,) = _by_kind("Deployment")
    env = {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["GROUPSCALE_AUTOSCALING"] == "1" and env["RAY_ADDRESS"] == f"{cluster['metadata']['name']}-head-svc:6379"
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"]["type"] == "Recreate"


def test_every_pod_gets_the_same_secrets_storage_and_versions_as_compose():
    compose = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())
    (secret,) = _by_kind("Secret")
    (config,) = _by_kind("ConfigMap")
    for name, template in _pod_templates().items():
        (container,) = template["spec"]["containers"]
        sources = {(s.get("secretRef") or s.get("configMapRef"))["name"] for s in container.get("envFrom", [])}
        assert sources == {secret["metadata"]["name"], config["metadata"]["name"]}, name
    keys = set(secret["stringData"]) | set(config["data"])
    assert {"MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_URI", "GROUPSCALE_STORAGE_URI"} <= keys
    assert {"GROUPSCALE_API_TOKEN", "GROUPSCALE_DATABASE_URL"} <= set(secret["stringData"])
    assert set(compose["x-storage"]) <= keys  # compose's storage settings, every one
    (cluster,) = _by_kind("RayCluster")
    assert cluster["spec"]["authOptions"] == {"mode": "token", "secretName": secret["metadata"]["name"]}
    assert "auth_token" in secret["stringData"]  # the key KubeRay reads the Ray token from
    ray_version = compose["x-build-args"]["RAY_VERSION"].split(":-")[1].rstrip("}")
    assert cluster["spec"]["rayVersion"] == ray_version
