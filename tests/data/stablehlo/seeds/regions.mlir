func.func @main(%arg0: tensor<1xf32>) -> (tensor<1xf32>, tensor<1xf32>) {
  %step = stablehlo.constant dense<2.500000e-01> : tensor<1xf32>
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %one = stablehlo.constant dense<1> : tensor<i32>
  %five = stablehlo.constant dense<5> : tensor<i32>
  %r:2 = stablehlo.while(%i = %zero, %sum = %arg0) : tensor<i32>, tensor<1xf32>
   cond {
    %c = stablehlo.compare  LT, %i, %five : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  } do {
    %n = stablehlo.add %i, %one : tensor<i32>
    %s = stablehlo.add %sum, %step : tensor<1xf32>
    stablehlo.return %n, %s : tensor<i32>, tensor<1xf32>
  }
  %b = "stablehlo.case"(%one) ({
    stablehlo.return %arg0 : tensor<1xf32>
  }, {
    %t = stablehlo.multiply %r#1, %step : tensor<1xf32>
    stablehlo.return %t : tensor<1xf32>
  }) : (tensor<i32>) -> tensor<1xf32>
  return %r#1, %b : tensor<1xf32>, tensor<1xf32>
}
