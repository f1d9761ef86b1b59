package main

import (
	"context"
	"fmt"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The commands of second-service-cidr: a second Service range added and removed at
// runtime as networking.k8s.io/v1 ServiceCIDR objects (KEP-1880). No
// controller manager runs here, so nothing sets the Ready condition or adds
// the deletion finalizer: the API server's allocator counts a ServiceCIDR
// without conditions as ready, and deleting it is immediate.

var serviceCIDRCommands = map[string]command{
	"create-servicecidr": {"create-servicecidr NAME CIDR[,CIDR]   (one CIDR per family)", runCreateServiceCIDR},
	"delete-servicecidr": {"delete-servicecidr NAME   (succeeds when it is already gone)", runDeleteServiceCIDR},
	"servicecidrs":       {"servicecidrs   (NAME CIDRS per line)", runListServiceCIDRs},
}

func runCreateServiceCIDR(ctx context.Context, args []string) error {
	pos, err := parseArgs(newFlags("create-servicecidr"), args, 2, 2)
	if err != nil {
		return err
	}
	cs, _, err := client()
	if err != nil {
		return err
	}
	obj := &networkingv1.ServiceCIDR{
		ObjectMeta: metav1.ObjectMeta{Name: pos[0]},
		Spec:       networkingv1.ServiceCIDRSpec{CIDRs: strings.Split(pos[1], ",")},
	}
	if _, err := cs.NetworkingV1().ServiceCIDRs().Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create servicecidr %s: %w", pos[0], err)
	}
	return nil
}

func runDeleteServiceCIDR(ctx context.Context, args []string) error {
	pos, err := parseArgs(newFlags("delete-servicecidr"), args, 1, 1)
	if err != nil {
		return err
	}
	cs, _, err := client()
	if err != nil {
		return err
	}
	err = cs.NetworkingV1().ServiceCIDRs().Delete(ctx, pos[0], metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete servicecidr %s: %w", pos[0], err)
	}
	return nil
}

func runListServiceCIDRs(ctx context.Context, args []string) error {
	if _, err := parseArgs(newFlags("servicecidrs"), args, 0, 0); err != nil {
		return err
	}
	cs, _, err := client()
	if err != nil {
		return err
	}
	list, err := cs.NetworkingV1().ServiceCIDRs().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list servicecidrs: %w", err)
	}
	for _, s := range list.Items {
		fmt.Printf("%s %s\n", s.Name, strings.Join(s.Spec.CIDRs, ","))
	}
	return nil
}
