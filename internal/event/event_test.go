package event

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestWriteRecordsTheEventOnTheObjectAtOnce(t *testing.T) {
	client := fake.NewClientset()
	ref := corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "shoot--a", Name: "kcm-1", UID: "u-1"}
	long := strings.Repeat("é", MaxMessage) // 2 bytes a rune: cut inside a rune
	if err := Write(context.Background(), client, ref, "depwatch-reaper", corev1.EventTypeNormal, "Reaped", long); err != nil {
		t.Fatal(err)
	}
	list, err := client.CoreV1().Events("shoot--a").List(context.Background(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("events %v, %v", list, err)
	}
	ev := list.Items[0]
	switch {
	case ev.InvolvedObject != ref || ev.Reason != "Reaped" || ev.Type != corev1.EventTypeNormal || ev.Source.Component != "depwatch-reaper":
		t.Errorf("event = %+v", ev)
	case len(ev.Message) > MaxMessage || !utf8.ValidString(ev.Message) || !strings.HasSuffix(ev.Message, "..."):
		t.Errorf("message of %d bytes, valid UTF-8 %v", len(ev.Message), utf8.ValidString(ev.Message))
	case !strings.HasPrefix(ev.Name, "kcm-1."):
		t.Errorf("name %q", ev.Name)
	}
}
