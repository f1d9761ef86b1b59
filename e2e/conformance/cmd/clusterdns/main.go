// Command clusterdns is the conformance cluster's stand-in for CoreDNS: the Services tests reach
// a Service by its name (`nc -v -t -w 2 endpoint-test2 80` in a pod), so the cluster needs DNS,
// and CoreDNS cannot be pulled here. It answers, over UDP, what the Kubernetes DNS spec
// (github.com/kubernetes/dns, docs/specification.md) asks for Services:
//
//	<service>.<namespace>.svc.<domain>  A: the ClusterIPs; CNAME for type ExternalName;
//	                                    no A for a headless Service (its pods are not needed here)
//
// Every other name is NXDOMAIN and nothing is forwarded: the cluster has no other network.
// It runs in run.sh's network namespace behind the Service kube-system/kube-dns (10.96.0.10),
// so pod DNS traffic goes through ipvsproxy like any UDP Service.
package main

import (
	"context"
	"flag"
	"log"
	"net"
	"net/netip"
	"strings"

	"golang.org/x/net/dns/dnsmessage"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of a client allowed to list and watch Services")
	listen := flag.String("listen", "203.0.113.1:53", "UDP address to serve")
	domain := flag.String("domain", "cluster.local", "cluster domain")
	flag.Parse()
	log.SetPrefix("clusterdns: ")

	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Fatalf("load kubeconfig %s: %v", *kubeconfig, err)
	}
	client := kubernetes.NewForConfigOrDie(cfg)
	factory := informers.NewSharedInformerFactory(client, 0)
	services := factory.Core().V1().Services()
	lister := services.Lister()
	ctx := context.Background()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), services.Informer().HasSynced) {
		log.Fatal("sync Services")
	}
	conn, err := net.ListenPacket("udp", *listen)
	if err != nil {
		log.Fatalf("listen on udp %s: %v", *listen, err)
	}
	log.Printf("serving %s on udp %s", *domain, *listen)
	suffix := ".svc." + strings.TrimSuffix(*domain, ".") + "."
	buf := make([]byte, 1500)
	for {
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			log.Fatalf("read: %v", err)
		}
		reply, err := answer(buf[:n], suffix, lister)
		if err != nil {
			log.Printf("query from %s: %v", from, err)
			continue
		}
		if _, err := conn.WriteTo(reply, from); err != nil {
			log.Printf("reply to %s: %v", from, err)
		}
	}
}

// answer builds the reply to one query: one question, answered from the Service lister.
func answer(query []byte, suffix string, services listersv1.ServiceLister) ([]byte, error) {
	var p dnsmessage.Parser
	header, err := p.Start(query)
	if err != nil {
		return nil, err
	}
	q, err := p.Question()
	if err != nil {
		return nil, err
	}
	rcode, records := lookup(q, suffix, services)
	reply := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: header.ID, Response: true, Authoritative: true, RecursionDesired: header.RecursionDesired, RCode: rcode})
	if err := reply.StartQuestions(); err != nil {
		return nil, err
	}
	if err := reply.Question(q); err != nil {
		return nil, err
	}
	if err := reply.StartAnswers(); err != nil {
		return nil, err
	}
	for _, r := range records {
		hdr := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 5}
		switch body := r.(type) {
		case *dnsmessage.AResource:
			err = reply.AResource(hdr, *body)
		case *dnsmessage.CNAMEResource:
			err = reply.CNAMEResource(hdr, *body)
		}
		if err != nil {
			return nil, err
		}
	}
	return reply.Finish()
}

// lookup answers <service>.<namespace>.svc.<domain>; a name of any other shape does not exist.
func lookup(q dnsmessage.Question, suffix string, services listersv1.ServiceLister) (dnsmessage.RCode, []dnsmessage.ResourceBody) {
	name := strings.ToLower(q.Name.String())
	rest, ok := strings.CutSuffix(name, suffix)
	svcName, namespace, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 || strings.Contains(namespace, ".") {
		return dnsmessage.RCodeNameError, nil
	}
	svc, err := services.Services(namespace).Get(svcName)
	if err != nil {
		return dnsmessage.RCodeNameError, nil
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		target, err := dnsmessage.NewName(strings.TrimSuffix(svc.Spec.ExternalName, ".") + ".")
		if err != nil {
			return dnsmessage.RCodeServerFailure, nil
		}
		return dnsmessage.RCodeSuccess, []dnsmessage.ResourceBody{&dnsmessage.CNAMEResource{CNAME: target}}
	}
	// The name exists; AAAA and other types get an empty answer (NOERROR, no records).
	if q.Type != dnsmessage.TypeA {
		return dnsmessage.RCodeSuccess, nil
	}
	var records []dnsmessage.ResourceBody
	for _, ip := range svc.Spec.ClusterIPs {
		addr, err := netip.ParseAddr(ip)
		if err != nil || !addr.Is4() {
			continue // "None" for headless Services, or an IPv6 family
		}
		records = append(records, &dnsmessage.AResource{A: addr.As4()})
	}
	return dnsmessage.RCodeSuccess, records
}
