package main

import (
	"net/netip"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

func TestAnswer(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, svc := range []*corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Name: "endpoint-test2", Namespace: "services-1"}, Spec: corev1.ServiceSpec{ClusterIPs: []string{"10.96.12.7"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "headless", Namespace: "services-1"}, Spec: corev1.ServiceSpec{ClusterIPs: []string{"None"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "ext", Namespace: "services-1"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "foo.example.com"}},
	} {
		if err := indexer.Add(svc); err != nil {
			t.Fatal(err)
		}
	}
	lister := listersv1.NewServiceLister(indexer)
	for _, tc := range []struct {
		name  string
		qtype dnsmessage.Type
		rcode dnsmessage.RCode
		want  []string
	}{
		{"endpoint-test2.services-1.svc.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, []string{"A 10.96.12.7"}},
		{"Endpoint-Test2.Services-1.SVC.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, []string{"A 10.96.12.7"}},
		{"endpoint-test2.services-1.svc.cluster.local.", dnsmessage.TypeAAAA, dnsmessage.RCodeSuccess, nil},
		{"headless.services-1.svc.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, nil},
		{"ext.services-1.svc.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, []string{"CNAME foo.example.com."}},
		// What a pod's search path tries before the full name: none of these exist.
		{"endpoint-test2.services-1.svc.cluster.local.services-1.svc.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeNameError, nil},
		{"endpoint-test2.other.svc.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeNameError, nil},
		{"example.com.", dnsmessage.TypeA, dnsmessage.RCodeNameError, nil},
	} {
		t.Run(tc.name+"/"+tc.qtype.String(), func(t *testing.T) {
			q := dnsmessage.Question{Name: dnsmessage.MustNewName(tc.name), Type: tc.qtype, Class: dnsmessage.ClassINET}
			query := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 7, RecursionDesired: true})
			_ = query.StartQuestions()
			_ = query.Question(q)
			packet, err := query.Finish()
			if err != nil {
				t.Fatal(err)
			}
			reply, err := answer(packet, ".svc.cluster.local.", lister)
			if err != nil {
				t.Fatalf("answer: %v", err)
			}
			var m dnsmessage.Message
			if err := m.Unpack(reply); err != nil {
				t.Fatalf("unpack reply: %v", err)
			}
			if m.ID != 7 || !m.Response || m.RCode != tc.rcode {
				t.Errorf("header id=%d response=%v rcode=%v, want id 7, a response, %v", m.ID, m.Response, m.RCode, tc.rcode)
			}
			var got []string
			for _, a := range m.Answers {
				switch b := a.Body.(type) {
				case *dnsmessage.AResource:
					got = append(got, "A "+netip.AddrFrom4(b.A).String())
				case *dnsmessage.CNAMEResource:
					got = append(got, "CNAME "+b.CNAME.String())
				}
			}
			if len(got) != len(tc.want) || (len(got) > 0 && got[0] != tc.want[0]) {
				t.Errorf("answers %q, want %q", got, tc.want)
			}
		})
	}
}
