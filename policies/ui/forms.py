"""Input parsing for the policy pages: the pod picker's value, the new-policy form, publish.

Every function here turns request data into typed values or raises InputError / a form error
with a sentence the page can show next to the field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django import forms

from policies.cluster.manifest import MAX_POD_BYTES
from policies.engine.document import POLICY_NAME
from policies.errors import InputError

from .examples import BLANK_POLICY, example_pod, example_policies, example_policy

# A Kubernetes object name (DNS subdomain) or namespace (DNS label).
_K8S_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_TOP_LEVEL_NAME = re.compile(r"(?m)^name:[ \t]*[^\n#]*?(?=[ \t]*(#|$))")


@dataclass(frozen=True)
class PodChoice:
    """Which pod a preview evaluates: a snapshot pod, an example file, or pasted YAML.

    `value` is what the picker and the URL carry: "ns/name", "example:<key>" or "pasted".
    """

    kind: str  # snapshot | example | pasted
    value: str
    namespace: str = ""
    name: str = ""
    key: str = ""
    text: str = ""


def pod_choice_parse(*, value: str, pasted: str = "") -> PodChoice:
    """The picker's value -> PodChoice; InputError says what is wrong with it."""
    value = (value or "").strip()
    if value == "pasted":
        if not pasted.strip():
            raise InputError("paste a Pod manifest (YAML or JSON) to preview it")
        if len(pasted.encode("utf-8", "surrogatepass")) > MAX_POD_BYTES:
            raise InputError(f"the pasted pod is larger than {MAX_POD_BYTES // 1024} KiB")
        return PodChoice(kind="pasted", value=value, text=pasted)
    if value.startswith("example:"):
        key = value.removeprefix("example:")
        found = example_pod(key=key)
        if found is None:
            raise InputError(f"there is no example pod {key!r}")
        return PodChoice(
            kind="example",
            value=value,
            key=key,
            namespace=found.namespace,
            name=found.name,
            text=found.text,
        )
    namespace, sep, name = value.removeprefix("snapshot:").partition("/")
    if not sep or not _K8S_NAME.fullmatch(namespace) or not _K8S_NAME.fullmatch(name):
        raise InputError(
            f"pod {value[:80]!r}: expected namespace/name of a pod in the cluster, "
            "example:<file> or pasted"
        )
    return PodChoice(kind="snapshot", value=f"{namespace}/{name}", namespace=namespace, name=name)


def document_with_name(*, text: str, name: str) -> str:
    """`text` with its top-level `name:` set to `name` (added first when missing)."""
    if _TOP_LEVEL_NAME.search(text):
        return _TOP_LEVEL_NAME.sub(f"name: {name}", text, count=1)
    return f"name: {name}\n{text}"


class NewPolicyForm(forms.Form):
    """Create a policy from an example or the blank template; the name comes from the
    document unless one is given here (so an example can be created twice)."""

    template = forms.ChoiceField(label="Start from")
    name = forms.CharField(
        label="Name",
        required=False,
        max_length=63,
        help_text="Lower-case letters, digits and dashes. Empty: the example's own name.",
    )

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        choices = [("blank", "Blank policy")]
        choices += [(e.key, e.name) for e in example_policies()]
        self.fields["template"].choices = choices

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        if name and not POLICY_NAME.fullmatch(name):
            raise forms.ValidationError(
                f"{name!r} is not a valid policy name: use lower-case letters, digits and "
                "dashes, starting and ending with a letter or digit"
            )
        return name

    def clean(self) -> dict:
        data = super().clean()
        if data.get("template") == "blank" and not data.get("name"):
            self.add_error("name", "a blank policy needs a name")
        return data

    def document(self) -> str:
        """The document to create (call after is_valid())."""
        key, name = self.cleaned_data["template"], self.cleaned_data["name"]
        if key == "blank":
            return BLANK_POLICY.format(name=name)
        example = example_policy(key=key)
        assert example is not None  # the field's choices are the examples
        return document_with_name(text=example.text, name=name) if name else example.text


class PublishForm(forms.Form):
    """The publish message (required: say what changed and why)."""

    message = forms.CharField(
        label="Message",
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="What changed and why; it is kept with the version and in the audit log.",
        error_messages={"required": "a publish message is required: say what changed and why"},
    )
