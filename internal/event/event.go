// Package event writes core/v1 Events the way depwatch's one-shot runs need them: at once and
// synchronously, so an Event exists before the Job's pod exits (client-go's asynchronous
// recorder would drop what is still queued when a short run ends). The always-on coordinator
// uses client-go's recorder instead.
package event

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// MaxMessage is the most of a message an Event keeps: the API server refuses longer ones.
const MaxMessage = 1024

// Write records one Event on the object ref names, in its namespace, from component.
func Write(ctx context.Context, client kubernetes.Interface, ref corev1.ObjectReference, component, eventType, reason, message string) error {
	now := metav1.Now() // real time even in tests: it names the Event
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			// The name scheme of client-go's event recorder: unique per object and instant.
			Name:      fmt.Sprintf("%s.%x", ref.Name, now.UnixNano()),
			Namespace: ref.Namespace,
		},
		InvolvedObject: ref,
		Reason:         reason,
		Message:        Truncate(message, MaxMessage),
		Type:           eventType,
		Source:         corev1.EventSource{Component: component},
		FirstTimestamp: now,
		LastTimestamp:  now,
		Count:          1,
	}
	if _, err := client.CoreV1().Events(ref.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("record the %s Event on %s %s/%s: %w", reason, ref.Kind, ref.Namespace, ref.Name, err)
	}
	return nil
}

// Truncate shortens s to at most n bytes of valid UTF-8, marking the cut with "...".
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n-3], "") + "..."
}
