package reaper

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// A skipping decoder for protobuf pod lists: it reads a PodList page straight into slim pods
// (slimPod's fields only) and steps over everything else without decoding it: managedFields,
// env, probes, volumes, images, resources, IPs. Decoding whole pods and collecting them as
// garbage was most of a cycle's CPU (docs/benchmarks.md); slimPod(full decode) == this
// decoder's pod is what TestSlimDecodeEqualsSlimOfFullDecode proves.
//
// Field numbers are those of k8s.io/api/core/v1/generated.proto and
// k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto; they never change (protobuf's
// compatibility rule, which the API server's own clients rely on). Small sub-messages that are
// kept whole (owner references, conditions, container states, times) are decoded by their
// generated Unmarshal, so they are exactly what a full decode gives.

// slimPodList is one list page of slim pods. It is a runtime.Object and a list (ListMeta) so
// that client-go's pager pages through it as through a PodList.
type slimPodList struct {
	metav1.TypeMeta
	metav1.ListMeta
	Items []corev1.Pod
}

func (l *slimPodList) DeepCopyObject() runtime.Object {
	out := &slimPodList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]corev1.Pod, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}

// protobufMagic prefixes every protobuf body of the API server (runtime.Unknown envelope).
var protobufMagic = []byte("k8s\x00")

func isProtobufBody(body []byte) bool { return bytes.HasPrefix(body, protobufMagic) }

// decodeProtobuf decodes an API server's protobuf PodList body: the k8s\x00 magic, the
// runtime.Unknown envelope, then the PodList it carries.
func (d *podDecoder) decodeProtobuf(body []byte) (*slimPodList, error) {
	if !isProtobufBody(body) {
		return nil, errors.New("not a protobuf body (no k8s\\x00 prefix)")
	}
	raw, err := unwrapUnknown(body[len(protobufMagic):])
	if err != nil {
		return nil, fmt.Errorf("protobuf envelope: %w", err)
	}
	l := &slimPodList{}
	if err := d.podList(raw, l); err != nil {
		return nil, fmt.Errorf("decoding a PodList: %w", err)
	}
	return l, nil
}

// unwrapUnknown returns the object bytes of a runtime.Unknown envelope (typeMeta = 1 with
// apiVersion = 1 and kind = 2, raw = 2, contentEncoding = 3, contentType = 4) without copying
// them (runtime.Unknown's Unmarshal copies the whole page), after checking it holds a PodList.
func unwrapUnknown(msg []byte) ([]byte, error) {
	var raw []byte
	var apiVersion, kind, encoding string
	err := walk(msg, func(f field) error {
		switch f.num {
		case 1:
			if err := f.want(protowire.BytesType, "typeMeta"); err != nil {
				return err
			}
			return walk(f.b, func(f field) error {
				var err error
				switch f.num {
				case 1:
					if err = f.want(protowire.BytesType, "apiVersion"); err == nil {
						apiVersion = string(f.b)
					}
				case 2:
					if err = f.want(protowire.BytesType, "kind"); err == nil {
						kind = string(f.b)
					}
				}
				return err
			})
		case 2:
			if err := f.want(protowire.BytesType, "raw"); err != nil {
				return err
			}
			raw = f.b
		case 3:
			if err := f.want(protowire.BytesType, "contentEncoding"); err != nil {
				return err
			}
			encoding = string(f.b)
		}
		return nil
	})
	switch {
	case err != nil:
		return nil, err
	case encoding != "":
		return nil, fmt.Errorf("unsupported content encoding %q", encoding)
	case kind != "" && kind != "PodList":
		return nil, fmt.Errorf("expected a PodList, the API server sent a %s (%s)", kind, apiVersion)
	}
	return raw, nil
}

// podDecoder holds a listing's interned strings: namespaces, label and annotation keys and
// values, phases, container names and the like repeat across pods, so each is allocated once
// per listing rather than once per pod. It is not safe for concurrent use.
type podDecoder struct {
	strs map[string]string
}

func newPodDecoder() *podDecoder { return &podDecoder{strs: map[string]string{}} }

const (
	internMaxLen     = 96
	internMaxEntries = 4096
)

// intern returns b as a string, shared with earlier equal strings of the page when short.
func (d *podDecoder) intern(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(b) > internMaxLen {
		return string(b)
	}
	if s, ok := d.strs[string(b)]; ok { // no allocation for the lookup
		return s
	}
	s := string(b)
	if len(d.strs) < internMaxEntries {
		d.strs[s] = s
	}
	return s
}

// field is one protobuf field: its number and type and, for the two types read here, its
// value (v for varints, b for length-delimited); at is the message from this field's tag on.
type field struct {
	num protowire.Number
	typ protowire.Type
	v   uint64
	b   []byte
	at  []byte
}

// varint reads the varint at the start of b: one- and two-byte varints (tags, lengths and
// small numbers: nearly all of a pod's) inline, longer ones by protowire.
func varint(b []byte) (uint64, int) {
	if len(b) > 0 && b[0] < 0x80 {
		return uint64(b[0]), 1
	}
	if len(b) > 1 && b[1] < 0x80 {
		return uint64(b[0]&0x7f) | uint64(b[1])<<7, 2
	}
	return protowire.ConsumeVarint(b)
}

// next reads the field at the start of b and returns it and what follows it. Fields of any
// other wire type (fixed32, fixed64, groups) are stepped over whole. It accepts and rejects
// what protowire's ConsumeTag, ConsumeVarint, ConsumeBytes and ConsumeFieldValue do.
func next(b []byte) (field, []byte, error) {
	tag, n := varint(b)
	if n < 0 {
		return field{}, nil, protowire.ParseError(n)
	}
	if tag>>3 < uint64(protowire.MinValidNumber) || tag>>3 > uint64(protowire.MaxValidNumber) {
		return field{}, nil, errors.New("invalid field number")
	}
	f := field{num: protowire.Number(tag >> 3), typ: protowire.Type(tag & 7), at: b}
	b = b[n:]
	switch f.typ {
	case protowire.BytesType:
		l, m := varint(b)
		if m < 0 {
			return field{}, nil, fmt.Errorf("field %d: %w", f.num, protowire.ParseError(m))
		}
		if l > uint64(len(b)-m) {
			return field{}, nil, fmt.Errorf("field %d: %w", f.num, io.ErrUnexpectedEOF)
		}
		f.b = b[m : m+int(l)]
		n = m + int(l)
	case protowire.VarintType:
		f.v, n = varint(b)
	default:
		n = protowire.ConsumeFieldValue(f.num, f.typ, b)
	}
	if n < 0 {
		return field{}, nil, fmt.Errorf("field %d: %w", f.num, protowire.ParseError(n))
	}
	return f, b[n:], nil
}

// want fails a kept field of the wrong wire type, as the generated Unmarshal does.
func (f field) want(t protowire.Type, name string) error {
	if f.typ != t {
		return fmt.Errorf("wrong wire type %d for field %s (%d)", f.typ, name, f.num)
	}
	return nil
}

// walk calls fn for each field of msg.
func walk(msg []byte, fn func(field) error) error {
	for len(msg) > 0 {
		f, rest, err := next(msg)
		if err != nil {
			return err
		}
		if err := fn(f); err != nil {
			return err
		}
		msg = rest
	}
	return nil
}

// PodList: metadata = 1 (ListMeta), items = 2.
func (d *podDecoder) podList(msg []byte, l *slimPodList) error {
	// Count the items first: one allocation for the page's pods.
	n := 0
	if err := walk(msg, func(f field) error {
		if f.num == 2 {
			n++
		}
		return nil
	}); err != nil {
		return err
	}
	l.Items = make([]corev1.Pod, 0, n)
	return walk(msg, func(f field) error {
		switch f.num {
		case 1:
			if err := f.want(protowire.BytesType, "metadata"); err != nil {
				return err
			}
			return l.ListMeta.Unmarshal(f.b)
		case 2:
			if err := f.want(protowire.BytesType, "items"); err != nil {
				return err
			}
			l.Items = append(l.Items, corev1.Pod{})
			if err := d.pod(f.b, &l.Items[len(l.Items)-1]); err != nil {
				return fmt.Errorf("item %d: %w", len(l.Items)-1, err)
			}
		}
		return nil
	})
}

// Pod: metadata = 1, spec = 2, status = 3.
func (d *podDecoder) pod(msg []byte, p *corev1.Pod) error {
	return walk(msg, func(f field) error {
		switch f.num {
		case 1:
			if err := f.want(protowire.BytesType, "metadata"); err != nil {
				return err
			}
			return d.objectMeta(f.b, &p.ObjectMeta)
		case 2:
			if err := f.want(protowire.BytesType, "spec"); err != nil {
				return err
			}
			return d.podSpec(f.b, &p.Spec)
		case 3:
			if err := f.want(protowire.BytesType, "status"); err != nil {
				return err
			}
			return d.podStatus(f.b, &p.Status)
		}
		return nil
	})
}

// ObjectMeta: name = 1, namespace = 3, uid = 5, resourceVersion = 6, creationTimestamp = 8,
// deletionTimestamp = 9, labels = 11, annotations = 12, ownerReferences = 13; managedFields
// (17), finalizers and the rest are skipped.
func (d *podDecoder) objectMeta(msg []byte, m *metav1.ObjectMeta) error {
	return walk(msg, func(f field) error {
		var err error
		switch f.num {
		case 1:
			if err = f.want(protowire.BytesType, "name"); err == nil {
				m.Name = string(f.b)
			}
		case 3:
			if err = f.want(protowire.BytesType, "namespace"); err == nil {
				m.Namespace = d.intern(f.b)
			}
		case 5:
			if err = f.want(protowire.BytesType, "uid"); err == nil {
				m.UID = types.UID(f.b)
			}
		case 6:
			if err = f.want(protowire.BytesType, "resourceVersion"); err == nil {
				m.ResourceVersion = string(f.b)
			}
		case 8:
			if err = f.want(protowire.BytesType, "creationTimestamp"); err == nil {
				err = m.CreationTimestamp.Unmarshal(f.b)
			}
		case 9:
			if err = f.want(protowire.BytesType, "deletionTimestamp"); err == nil {
				if m.DeletionTimestamp == nil {
					m.DeletionTimestamp = &metav1.Time{}
				}
				err = m.DeletionTimestamp.Unmarshal(f.b)
			}
		case 11:
			if err = f.want(protowire.BytesType, "labels"); err == nil {
				if m.Labels == nil {
					m.Labels = make(map[string]string, countRun(f.at, 11))
				}
				err = d.mapEntry(f.b, m.Labels)
			}
		case 12:
			if err = f.want(protowire.BytesType, "annotations"); err == nil {
				if m.Annotations == nil {
					m.Annotations = make(map[string]string, countRun(f.at, 12))
				}
				err = d.mapEntry(f.b, m.Annotations)
			}
		case 13:
			if err = f.want(protowire.BytesType, "ownerReferences"); err == nil {
				m.OwnerReferences = append(m.OwnerReferences, metav1.OwnerReference{})
				err = m.OwnerReferences[len(m.OwnerReferences)-1].Unmarshal(f.b)
			}
		}
		return err
	})
}

// countRun counts the fields numbered num at the start of msg, up to the first other one: the
// entries of a repeated field, which encoders write one after the other, to size its slice or
// map once. Entries elsewhere in the message are still decoded (appended).
func countRun(msg []byte, num protowire.Number) int {
	n := 0
	for len(msg) > 0 {
		f, rest, err := next(msg)
		if err != nil || f.num != num {
			break
		}
		n++
		msg = rest
	}
	return n
}

// mapEntry decodes a map<string, string> entry (key = 1, value = 2) into m, as the generated
// code does: a missing key or value is "", a repeated key's last entry wins.
func (d *podDecoder) mapEntry(msg []byte, m map[string]string) error {
	var k, v string
	err := walk(msg, func(f field) error {
		switch f.num {
		case 1:
			if err := f.want(protowire.BytesType, "map key"); err != nil {
				return err
			}
			k = d.intern(f.b)
		case 2:
			if err := f.want(protowire.BytesType, "map value"); err != nil {
				return err
			}
			v = d.intern(f.b)
		}
		return nil
	})
	if err != nil {
		return err
	}
	m[k] = v
	return nil
}

// PodSpec: containers = 2, restartPolicy = 3, nodeName = 10, initContainers = 20.
func (d *podDecoder) podSpec(msg []byte, s *corev1.PodSpec) error {
	return walk(msg, func(f field) error {
		var err error
		switch f.num {
		case 2:
			if err = f.want(protowire.BytesType, "containers"); err == nil {
				if s.Containers == nil {
					s.Containers = make([]corev1.Container, 0, countRun(f.at, 2))
				}
				s.Containers = append(s.Containers, corev1.Container{})
				err = d.container(f.b, &s.Containers[len(s.Containers)-1])
			}
		case 3:
			if err = f.want(protowire.BytesType, "restartPolicy"); err == nil {
				s.RestartPolicy = corev1.RestartPolicy(d.intern(f.b))
			}
		case 10:
			if err = f.want(protowire.BytesType, "nodeName"); err == nil {
				s.NodeName = d.intern(f.b)
			}
		case 20:
			if err = f.want(protowire.BytesType, "initContainers"); err == nil {
				if s.InitContainers == nil {
					s.InitContainers = make([]corev1.Container, 0, countRun(f.at, 20))
				}
				s.InitContainers = append(s.InitContainers, corev1.Container{})
				err = d.container(f.b, &s.InitContainers[len(s.InitContainers)-1])
			}
		}
		return err
	})
}

// Container: name = 1, restartPolicy = 24 (a pointer: set when present, even if "").
func (d *podDecoder) container(msg []byte, c *corev1.Container) error {
	return walk(msg, func(f field) error {
		var err error
		switch f.num {
		case 1:
			if err = f.want(protowire.BytesType, "name"); err == nil {
				c.Name = d.intern(f.b)
			}
		case 24:
			if err = f.want(protowire.BytesType, "restartPolicy"); err == nil {
				p := corev1.ContainerRestartPolicy(d.intern(f.b))
				c.RestartPolicy = &p
			}
		}
		return err
	})
}

// PodStatus: phase = 1, conditions = 2, reason = 4, startTime = 7, containerStatuses = 8,
// initContainerStatuses = 10.
func (d *podDecoder) podStatus(msg []byte, s *corev1.PodStatus) error {
	return walk(msg, func(f field) error {
		var err error
		switch f.num {
		case 1:
			if err = f.want(protowire.BytesType, "phase"); err == nil {
				s.Phase = corev1.PodPhase(d.intern(f.b))
			}
		case 2:
			if err = f.want(protowire.BytesType, "conditions"); err == nil {
				if s.Conditions == nil {
					s.Conditions = make([]corev1.PodCondition, 0, countRun(f.at, 2))
				}
				s.Conditions = append(s.Conditions, corev1.PodCondition{})
				err = s.Conditions[len(s.Conditions)-1].Unmarshal(f.b) // kept whole
			}
		case 4:
			if err = f.want(protowire.BytesType, "reason"); err == nil {
				s.Reason = d.intern(f.b)
			}
		case 7:
			if err = f.want(protowire.BytesType, "startTime"); err == nil {
				if s.StartTime == nil {
					s.StartTime = &metav1.Time{}
				}
				err = s.StartTime.Unmarshal(f.b)
			}
		case 8:
			if err = f.want(protowire.BytesType, "containerStatuses"); err == nil {
				if s.ContainerStatuses == nil {
					s.ContainerStatuses = make([]corev1.ContainerStatus, 0, countRun(f.at, 8))
				}
				s.ContainerStatuses = append(s.ContainerStatuses, corev1.ContainerStatus{})
				err = d.containerStatus(f.b, &s.ContainerStatuses[len(s.ContainerStatuses)-1])
			}
		case 10:
			if err = f.want(protowire.BytesType, "initContainerStatuses"); err == nil {
				if s.InitContainerStatuses == nil {
					s.InitContainerStatuses = make([]corev1.ContainerStatus, 0, countRun(f.at, 10))
				}
				s.InitContainerStatuses = append(s.InitContainerStatuses, corev1.ContainerStatus{})
				err = d.containerStatus(f.b, &s.InitContainerStatuses[len(s.InitContainerStatuses)-1])
			}
		}
		return err
	})
}

// ContainerStatus: name = 1, state = 2 (kept whole), restartCount = 5.
func (d *podDecoder) containerStatus(msg []byte, s *corev1.ContainerStatus) error {
	return walk(msg, func(f field) error {
		var err error
		switch f.num {
		case 1:
			if err = f.want(protowire.BytesType, "name"); err == nil {
				s.Name = d.intern(f.b)
			}
		case 2:
			if err = f.want(protowire.BytesType, "state"); err == nil {
				err = s.State.Unmarshal(f.b)
			}
		case 5:
			if err = f.want(protowire.VarintType, "restartCount"); err == nil {
				s.RestartCount = int32(f.v)
			}
		}
		return err
	})
}
